//! Reproduces: a waiter's re-check of its queued write place on {x, y}, while its uid holds a read lock on "x" alone, is charged a second time ("beside") and refused over a per-connection cap that holds everything the table keeps.
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
//! Scene: U read-locks "x" (its set {x} charged); R read-locks "x" too
//! over another connection. U waits (pushed) for the write lock on x and
//! y: queued, charged as the new set {x, y}. The cap holds both charges
//! with room to spare, but not {x, y} twice. U asks the same wait again
//! (a client's re-check): the server finds {x, y} charged and, as U
//! holds "x", charges a place "beside" it (src/net/queueing.rs, `ask`,
//! `Reserved::Already(..) if locker.holds_any(args) && !locker.holds_all`),
//! although the set's own charge is that place's (it was charged for the
//! place and never granted). Real time (sockets), every call bounded.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_asked_again_beside_a_lock_on_fewer_names_is_admitted_under_the_cap() {
    const CAP: usize = 6_000;
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    config.max_bytes_per_connection = CAP;
    let locker = LockerConfig {
        validity: Duration::from_secs(30),
        quarantine: Duration::ZERO,
    };
    let node = start_over(locker, config).await;
    let (mut u, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut r, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();

    assert_eq!(
        call(&mut u, 1, &lock_request(1, OP_RLOCK, "U", &["x"])).await,
        [REPLY_BOOL, 1],
        "U read-locks x"
    );
    let read_lock = node.stats.lock_bytes();
    assert_eq!(
        call(&mut r, 1, &lock_request(1, OP_RLOCK, "R", &["x"])).await,
        [REPLY_BOOL, 1],
        "R read-locks x"
    );
    let with_r = node.stats.lock_bytes();
    let wait = lock_wait_request(2, "U", &["x", "y"], (1, 1), TTL, true);
    let queued = call(&mut u, 2, &wait).await;
    assert_eq!(
        queued[..2],
        [REPLY_WAIT, QUEUED],
        "U waits for the write lock on x and y: {queued:?}"
    );
    let place = node.stats.lock_bytes() - with_r;
    assert!(
        read_lock + place <= CAP && read_lock + 2 * place > CAP,
        "the cap ({CAP}) holds U's read lock ({read_lock}) and its place ({place}), not the \
         place twice"
    );
    let before = node.stats.lock_bytes();
    let wait = lock_wait_request(3, "U", &["x", "y"], (1, 1), TTL, true);
    let again = call(&mut u, 3, &wait).await;
    let after = node.stats.lock_bytes();
    assert_eq!(
        again[..2.min(again.len())],
        [REPLY_WAIT, QUEUED],
        "U's re-check of the same wait (same uid, ticket and names; the table keeps the same \
         place) is refused over a cap that holds all U keeps: read lock {read_lock} + place \
         {place} <= {CAP} (server total {before} before, {after} after, R's read lock on another connection among it): {:?}",
        String::from_utf8_lossy(&again)
    );
    assert_eq!(after, before, "the re-check charges nothing more");
    drop((u, r));
}
