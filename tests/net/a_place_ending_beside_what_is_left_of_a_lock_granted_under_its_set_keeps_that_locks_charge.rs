//! docs/lock-servers.md, "Limits and memory": "A lock stays counted until
//! it is released [...], or until it expired"; "Connection slots": a lock
//! "released under other names than it was granted with" counts as one
//! that expired without a release, "since the server charges a lock by its
//! exact set of names".
//!
//! Connection 1: `u` waits, for 300 ms, for the write lock on "a" and "b"
//! (`v` reads "b"): the set ["a", "b"] is charged for the place. Over
//! connection 2, `u` takes the read lock on "a" and "b": the same set,
//! already charged, now pays for these entries too. Connection 1 refreshes
//! `u`'s lock (the ledger charges `u` to it again), and connection 2
//! releases `u`'s read lock on "b" only, which leaves the entry on "a"
//! standing, charged as the set ["a", "b"]. When the place expires,
//! connection 1 settles it: its set's charge was made for it
//! (`own_charge`) and `u` no longer holds every one of its names
//! (`holds_every`), so the charge goes, though `u`'s entry on "a", granted
//! under that set, still stands: the table keeps an entry nothing charges.
//! Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::{LockMode, NetLocker, Ticket, WaitArgs, WaitReply};

use crate::node::{args, remote, reservation, start, TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_ending_beside_what_is_left_of_a_lock_granted_under_its_set_keeps_that_locks_charge(
) {
    let node = start(ServerConfig::new(TOKEN)).await;
    let (first, second, other) = (
        remote(&node).await,
        remote(&node).await,
        remote(&node).await,
    );
    let within = Duration::from_secs(5);
    let theirs = args("v", &["b".to_owned()]);
    let call = tokio::time::timeout(within, other.rlock(&theirs));
    assert!(call
        .await
        .expect("v's read lock on b: an answer within 5 s")
        .unwrap());
    let v_only = node.stats.lock_bytes();
    let both = args("u", &["a".to_owned(), "b".to_owned()]);
    let short = WaitArgs {
        ticket: Ticket::now(),
        place_ttl: Duration::from_millis(300),
        wake: None,
    };
    let call = tokio::time::timeout(within, first.lock_wait(&both, LockMode::Write, &short));
    let waited = call.await.expect("u's wait: an answer within 5 s").unwrap();
    assert!(
        matches!(waited, WaitReply::Queued | WaitReply::Refused),
        "{waited:?}"
    );
    let call = tokio::time::timeout(within, second.rlock(&both));
    assert!(call
        .await
        .expect("u's read lock on a and b: an answer within 5 s")
        .unwrap());
    let call = tokio::time::timeout(within, first.refresh(&both));
    assert!(call
        .await
        .expect("u's refresh: an answer within 5 s")
        .unwrap());
    let just_b = args("u", &["b".to_owned()]);
    let call = tokio::time::timeout(within, second.runlock(&just_b));
    assert!(call
        .await
        .expect("u's release of b: an answer within 5 s")
        .unwrap());

    // A connection looks for its expired places at most once a second.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    // Connection 1's next wait settles the expired place; its own lock (on
    // a free name, granted at once) is released again.
    let free = args("x", &["d".to_owned()]);
    let wait = reservation();
    let call = tokio::time::timeout(within, first.lock_wait(&free, LockMode::Write, &wait));
    assert_eq!(
        call.await.expect("x's wait: an answer within 5 s").unwrap(),
        WaitReply::Granted
    );
    let call = tokio::time::timeout(within, first.unlock(&free));
    assert!(call
        .await
        .expect("x's release: an answer within 5 s")
        .unwrap());
    assert!(
        node.locker
            .snapshot()
            .iter()
            .any(|e| e.uid == "u" && e.resource == "a"),
        "u's read entry on a stands (validity 60 s)"
    );
    assert!(
        node.stats.lock_bytes() > v_only,
        "u's read entry on a, granted under the set [a, b], stands in the table, yet the server \
         charges only v's read lock ({v_only} bytes): the place's end gave the set's charge back"
    );
}
