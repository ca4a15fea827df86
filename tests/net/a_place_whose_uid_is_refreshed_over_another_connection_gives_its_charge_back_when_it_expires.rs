//! docs/lock-servers.md, "Limits and memory": "A place is charged as a
//! lock is while its connection keeps it [...]. A place that ends without
//! a grant gives its charge back, also when its uid holds a lock on some
//! of its names under another set of names (that lock is charged as its
//! own set)."
//!
//! Connection 1 holds `u`'s lock on "a"; `v` holds "b". Over connection 2,
//! `u` waits, for 300 ms, for "b": the place's set is charged, and the
//! ledger moves `u`'s whole charge to connection 2. Connection 1 then
//! refreshes `u`'s lock on "a", which moves the charge back to it. The
//! place expires without a grant; connection 2 settles it at its next
//! wait, but gives the place's charge back only while `u` is charged to
//! connection 2 (`release_if_charged_to` in `end_places`), and it is
//! charged to connection 1: the charge for "b" stays, and each refresh of
//! `u`'s lock on "a" keeps it from lapsing. Real time (sockets), every
//! wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::{LockMode, NetLocker, Ticket, WaitArgs, WaitReply};

use crate::node::{args, remote, reservation, start, TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_whose_uid_is_refreshed_over_another_connection_gives_its_charge_back_when_it_expires(
) {
    let node = start(ServerConfig::new(TOKEN)).await;
    let (first, second, other) = (
        remote(&node).await,
        remote(&node).await,
        remote(&node).await,
    );
    let within = Duration::from_secs(5);
    let held = args("u", &["a".to_owned()]);
    let call = tokio::time::timeout(within, first.lock(&held));
    assert!(call
        .await
        .expect("u's lock on a: an answer within 5 s")
        .unwrap());
    let theirs = args("v", &["b".to_owned()]);
    let call = tokio::time::timeout(within, other.lock(&theirs));
    assert!(call
        .await
        .expect("v's lock on b: an answer within 5 s")
        .unwrap());
    let before = node.stats.lock_bytes();
    let wanted = args("u", &["b".to_owned()]);
    let short = WaitArgs {
        ticket: Ticket::now(),
        place_ttl: Duration::from_millis(300),
        wake: None,
    };
    let call = tokio::time::timeout(within, second.lock_wait(&wanted, LockMode::Write, &short));
    let waited = call.await.expect("u's wait: an answer within 5 s").unwrap();
    assert!(
        matches!(waited, WaitReply::Queued | WaitReply::Refused),
        "{waited:?}"
    );
    assert!(node.stats.lock_bytes() > before, "the place is charged");
    // Connection 1 refreshes u's lock: u is charged to it again.
    let call = tokio::time::timeout(within, first.refresh(&held));
    assert!(call
        .await
        .expect("u's refresh: an answer within 5 s")
        .unwrap());

    // A connection looks for its expired places at most once a second.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    // Connection 2's next wait settles the expired place; its own lock (on
    // a free name, granted at once) is released again.
    let free = args("x", &["c".to_owned()]);
    let wait = reservation();
    let call = tokio::time::timeout(within, second.lock_wait(&free, LockMode::Write, &wait));
    assert_eq!(
        call.await.expect("x's wait: an answer within 5 s").unwrap(),
        WaitReply::Granted
    );
    let call = tokio::time::timeout(within, second.unlock(&free));
    assert!(call
        .await
        .expect("x's release: an answer within 5 s")
        .unwrap());
    for _ in 0..3 {
        let call = tokio::time::timeout(within, first.refresh(&held));
        assert!(call
            .await
            .expect("u's refresh: an answer within 5 s")
            .unwrap());
    }
    assert_eq!(node.locker.waiting(), 0, "the place expired from the table");
    assert_eq!(
        node.stats.lock_bytes(),
        before,
        "after u's place on b expired, the server still charges its bytes while connection 1 \
         refreshes u's lock on a (u's and v's locks were charged {before} bytes before the wait)"
    );
}
