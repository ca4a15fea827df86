//! docs/lock-servers.md, "Limits and memory": "A place that ends without a
//! grant gives its charge back, also when its uid holds a lock on some of
//! its names under another set of names (that lock is charged as its own
//! set)."
//!
//! `u` holds a read lock on "a", "b" and "c" (one set) and waits, for
//! 300 ms, for the write lock on "a" and "b" (another set, charged for the
//! place), which `v`'s read lock on "b" blocks. The place expires without
//! a grant. Its uid holds every one of its names, under the larger set,
//! so the server keeps the place's charge (`holds_every` in `end_places`),
//! and each refresh of `u`'s read lock keeps it from lapsing: the
//! connection stays charged for a place the table no longer keeps for as
//! long as its client refreshes. Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::{LockMode, NetLocker, Ticket, WaitArgs, WaitReply};

use crate::node::{args, remote, reservation, start, TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_place_inside_its_uids_larger_read_lock_is_not_charged_while_the_lock_is_refreshed(
) {
    let node = start(ServerConfig::new(TOKEN)).await;
    let (client, other) = (remote(&node).await, remote(&node).await);
    let within = Duration::from_secs(5);
    let abc = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
    let held = args("u", &abc);
    let call = tokio::time::timeout(within, client.rlock(&held));
    assert!(call
        .await
        .expect("u's read lock on a, b, c: an answer within 5 s")
        .unwrap());
    let theirs = args("v", &["b".to_owned()]);
    let call = tokio::time::timeout(within, other.rlock(&theirs));
    assert!(call
        .await
        .expect("v's read lock on b: an answer within 5 s")
        .unwrap());
    let both = args("u", &["a".to_owned(), "b".to_owned()]);
    let before = node.stats.lock_bytes();
    let short = WaitArgs {
        ticket: Ticket::now(),
        place_ttl: Duration::from_millis(300),
        wake: None,
    };
    let call = tokio::time::timeout(within, client.lock_wait(&both, LockMode::Write, &short));
    let waited = call.await.expect("u's wait: an answer within 5 s").unwrap();
    assert!(
        matches!(waited, WaitReply::Queued | WaitReply::Refused),
        "{waited:?}"
    );
    assert!(node.stats.lock_bytes() > before, "the place is charged");

    // A connection looks for its expired places at most once a second.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    // The connection's next wait settles the expired place; its own lock
    // (on a free name, granted at once) is released again.
    let free = args("x", &["d".to_owned()]);
    let wait = reservation();
    let call = tokio::time::timeout(within, client.lock_wait(&free, LockMode::Write, &wait));
    assert_eq!(
        call.await.expect("x's wait: an answer within 5 s").unwrap(),
        WaitReply::Granted
    );
    let call = tokio::time::timeout(within, client.unlock(&free));
    assert!(call
        .await
        .expect("x's release: an answer within 5 s")
        .unwrap());
    for _ in 0..3 {
        let call = tokio::time::timeout(within, client.refresh(&held));
        assert!(call
            .await
            .expect("u's refresh: an answer within 5 s")
            .unwrap());
    }
    assert_eq!(node.locker.waiting(), 0, "the place expired from the table");
    assert_eq!(
        node.stats.lock_bytes(),
        before,
        "after u's place on a and b expired, the server still charges its bytes while u \
         refreshes its read lock on a, b and c (u's and v's read locks were charged {before} \
         bytes before the wait)"
    );
}
