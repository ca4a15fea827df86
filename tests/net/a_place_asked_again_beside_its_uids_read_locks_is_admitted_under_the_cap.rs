//! Reproduces: a waiter's re-check of its queued write place on {x, y},
//! while its uid holds read locks on some or all of those names under
//! other sets, is charged a second time ("beside") and refused over a
//! per-connection cap that holds everything the table keeps.
//!
//! docs/lock-servers.md, "Limits and memory": a place "is charged as a
//! lock is while its connection keeps it"; only "one a uid keeps beside
//! its own lock on the same names ... is charged apart from that lock".
//! The only requests the docs allow to be refused though what would stand
//! fits are a waiter asking again under a new uid or for other names, and
//! a wait the table would grant at once on a full connection. Here U asks
//! again under its uid, its ticket and the same names, and the table would
//! keep the very same place.
//!
//! Scene: U read-locks `u_reads` (each set charged); R read-locks "x" too
//! over another connection. U waits (pushed) for the write lock on x and
//! y: queued, charged as the new set {x, y}. The cap holds all these
//! charges with room to spare, but not {x, y} twice. U asks the same wait
//! again (a client's re-check). The set {x, y} was charged for the place
//! and never granted: it pays for that place, and U's read locks are paid
//! for by their own sets, whether they cover some of the names or all of
//! them. Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::LockerConfig;

use crate::node::{start_over, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, lock_wait_request, OP_RLOCK, QUEUED, REPLY_BOOL,
    REPLY_WAIT, VERSION_6,
};

const TTL: Duration = Duration::from_secs(30);

async fn re_check_beside_read_locks_is_admitted(u_reads: &[&[&str]]) {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    let locker = LockerConfig {
        validity: Duration::from_secs(30),
        quarantine: Duration::ZERO,
    };
    // Sized below, once the charges are known: first a server without a
    // cap measures them.
    let measure = start_over(locker, config.clone()).await;
    let (read_locks, place) = charges(&measure, u_reads).await;
    let cap = read_locks + place + place / 2;
    config.max_bytes_per_connection = cap;
    let node = start_over(locker, config).await;
    let (mut u, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut r, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    for (n, names) in u_reads.iter().enumerate() {
        let id = n as u64 + 1;
        assert_eq!(
            call(&mut u, id, &lock_request(id, OP_RLOCK, "U", names)).await,
            [REPLY_BOOL, 1],
            "U read-locks {names:?}"
        );
    }
    assert_eq!(
        call(&mut r, 1, &lock_request(1, OP_RLOCK, "R", &["x"])).await,
        [REPLY_BOOL, 1],
        "R read-locks x"
    );
    let wait = lock_wait_request(100, "U", &["x", "y"], (1, 1), TTL, true);
    let queued = call(&mut u, 100, &wait).await;
    assert_eq!(
        queued[..2],
        [REPLY_WAIT, QUEUED],
        "U waits for the write lock on x and y: {queued:?}"
    );
    let before = node.stats.lock_bytes();
    let wait = lock_wait_request(101, "U", &["x", "y"], (1, 1), TTL, true);
    let again = call(&mut u, 101, &wait).await;
    let after = node.stats.lock_bytes();
    assert_eq!(
        again[..2.min(again.len())],
        [REPLY_WAIT, QUEUED],
        "U holding read locks on {u_reads:?}: its re-check of the same wait (same uid, ticket \
         and names; the table keeps the same place) is refused over a cap ({cap}) that holds \
         all U keeps (read locks {read_locks} + place {place}; server total {before} before, \
         {after} after, R's read lock on another connection among it): {:?}",
        String::from_utf8_lossy(&again)
    );
    assert_eq!(after, before, "the re-check charges nothing more");
    drop((u, r));
}

/// What U's read locks and its place cost, on a server without a cap.
async fn charges(node: &crate::node::Node, u_reads: &[&[&str]]) -> (usize, usize) {
    let (mut u, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut r, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    for (n, names) in u_reads.iter().enumerate() {
        let id = n as u64 + 1;
        assert_eq!(
            call(&mut u, id, &lock_request(id, OP_RLOCK, "U", names)).await,
            [REPLY_BOOL, 1]
        );
    }
    let read_locks = node.stats.lock_bytes();
    assert_eq!(
        call(&mut r, 1, &lock_request(1, OP_RLOCK, "R", &["x"])).await,
        [REPLY_BOOL, 1]
    );
    let with_r = node.stats.lock_bytes();
    let wait = lock_wait_request(100, "U", &["x", "y"], (1, 1), TTL, true);
    let queued = call(&mut u, 100, &wait).await;
    assert_eq!(queued[..2], [REPLY_WAIT, QUEUED], "{queued:?}");
    let place = node.stats.lock_bytes() - with_r;
    drop((u, r));
    (read_locks, place)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_asked_again_beside_a_read_lock_on_fewer_names_is_admitted_under_the_cap() {
    re_check_beside_read_locks_is_admitted(&[&["x"]]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_asked_again_beside_read_locks_on_every_name_under_other_sets_is_admitted() {
    re_check_beside_read_locks_is_admitted(&[&["x"], &["y"]]).await;
}
