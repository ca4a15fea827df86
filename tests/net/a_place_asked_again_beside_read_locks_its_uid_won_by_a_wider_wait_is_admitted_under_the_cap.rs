//! Reproduces: a waiter's re-check of its queued write place on {x, y},
//! while its uid holds read locks on x and y granted by ONE earlier wait
//! for a wider set {x, y, z} (charged as that set), is charged a second
//! time ("beside") and refused over a per-connection cap that holds
//! everything the table keeps.
//!
//! `holds_all_by_one_wait` asks only whether every name's entry carries
//! the same ticket, not whether that wait was for these very names: the
//! read wait on {x, y, z} (its own set, charged as such) passes, so the
//! set {x, y}, charged for the place alone, is taken to pay for entries
//! it never paid for, and the place is charged beside them.
//!
//! docs/lock-servers.md, "Limits and memory": a place "is charged as a
//! lock is while its connection keeps it"; the admitted refusals are a
//! waiter asking again under a new uid or for other names, and a wait the
//! table would grant at once over a full connection. Here U asks again
//! under its uid, its ticket and the same names; the table keeps the very
//! same place. Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::LockerConfig;

use crate::node::{start_over, Node, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, lock_wait_request, read_wait_request, OP_RLOCK,
    GRANTED, QUEUED, REPLY_BOOL, REPLY_WAIT, VERSION_6,
};

const TTL: Duration = Duration::from_secs(30);
const WIDE: &[&str] = &["x", "y", "z"];

/// U read-waits for {x, y, z} (granted at once, ticket (0, 7)); R
/// read-locks x over another connection; U waits (pushed) for the write
/// lock on {x, y} (queued behind R). Returns (U's read set, its place).
async fn scene(node: &Node) -> (usize, usize, tokio::net::TcpStream, tokio::net::TcpStream) {
    let (mut u, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut r, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let read = read_wait_request(1, "U", WIDE, (0, 7), TTL, true);
    let granted = call(&mut u, 1, &read).await;
    assert_eq!(
        granted[..2],
        [REPLY_WAIT, GRANTED],
        "U's read wait on {{x, y, z}} is granted at once: {granted:?}"
    );
    let read_set = node.stats.lock_bytes();
    assert_eq!(
        call(&mut r, 1, &lock_request(1, OP_RLOCK, "R", &["x"])).await,
        [REPLY_BOOL, 1],
        "R read-locks x"
    );
    let with_r = node.stats.lock_bytes();
    let wait = lock_wait_request(100, "U", &["x", "y"], (1, 1), TTL, true);
    let queued = call(&mut u, 100, &wait).await;
    assert_eq!(
        queued[..2],
        [REPLY_WAIT, QUEUED],
        "U waits for the write lock on x and y: {queued:?}"
    );
    let place = node.stats.lock_bytes() - with_r;
    (read_set, place, u, r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_asked_again_beside_read_locks_its_uid_won_by_a_wider_wait_is_admitted() {
    tokio::time::timeout(Duration::from_secs(20), async {
        let mut config = ServerConfig::new(TOKEN);
        config.idle_timeout = None;
        let locker = LockerConfig {
            validity: Duration::from_secs(30),
            quarantine: Duration::ZERO,
        };
        // A server without a cap measures the charges first.
        let measure = start_over(locker, config.clone()).await;
        let (read_set, place, u, r) = scene(&measure).await;
        drop((u, r));
        let cap = read_set + place + place / 2;
        config.max_bytes_per_connection = cap;
        let node = start_over(locker, config).await;
        let (_, _, mut u, r) = scene(&node).await;
        let before = node.stats.lock_bytes();
        let wait = lock_wait_request(101, "U", &["x", "y"], (1, 1), TTL, true);
        let again = call(&mut u, 101, &wait).await;
        let after = node.stats.lock_bytes();
        assert_eq!(
            again[..2.min(again.len())],
            [REPLY_WAIT, QUEUED],
            "U holding read locks on x, y, z by one wait for {{x, y, z}}: its re-check of the \
             same write wait on {{x, y}} (same uid, ticket and names; the table keeps the same \
             place) is refused over a cap ({cap}) that holds all U keeps (read set {read_set} \
             + place {place}; server total {before} before, {after} after, R's read lock on \
             another connection among it): {:?}",
            String::from_utf8_lossy(&again)
        );
        assert_eq!(after, before, "the re-check charges nothing more");
        drop((u, r));
    })
    .await
    .expect("the scene is over within 20 s");
}
