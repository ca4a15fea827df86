//! docs/lock-servers.md, "Limits and memory": the server keeps its
//! account by lock id, so "an expired lock of a uid stays counted while
//! another lock of the same uid is refreshed, and goes with the last of
//! them".
//!
//! A server over a locker of a 1 s validity. `u` takes a lock on "a" and,
//! under the same uid, another on "b" (two charges of one uid). The client
//! refreshes the lock on "a" only; the lock on "b" expires and the table
//! drops it, while its charge stays with the uid's. Once the client stops
//! refreshing, both charges go within the lapse (the validity and an
//! expiry pass) and the server's next sweep. (A review counted the charge
//! kept meanwhile as a break: it counts too much, and only against the
//! client's own limits; the docs say so. Lapsing each set by itself let a
//! client refresh entries under a set of short texts while the sets that
//! paid for their long owners and sources lapsed: a refresh touches all
//! of its uid's sets.) Real time (sockets), every wait bounded (about 8 s
//! in all).
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::NetLocker;

use crate::lockers;
use crate::node::{args, remote, start_over, TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charges_of_a_uid_go_once_none_of_its_locks_is_refreshed() {
    let locker = lockers::config_without_quarantine(Duration::from_secs(1));
    let node = start_over(locker, ServerConfig::new(TOKEN)).await;
    let client = remote(&node).await;
    let within = Duration::from_secs(5);
    let a = args("u", &["a".to_owned()]);
    let b = args("u", &["b".to_owned()]);
    let call = tokio::time::timeout(within, client.lock(&a));
    assert!(call
        .await
        .expect("u's lock on a: an answer within 5 s")
        .unwrap());
    let only_a = node.stats.lock_bytes();
    let call = tokio::time::timeout(within, client.lock(&b));
    assert!(call
        .await
        .expect("u's lock on b: an answer within 5 s")
        .unwrap());
    assert!(node.stats.lock_bytes() > only_a, "both locks are charged");
    // Refresh "a" every 200 ms for 3.4 s: "b" expires after 1 s, and the
    // locker's expiry passes (every validity) drop it.
    for _ in 0..17 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let call = tokio::time::timeout(within, client.refresh(&a));
        assert!(call
            .await
            .expect("u's refresh of a: an answer within 5 s")
            .unwrap());
    }
    assert!(
        !node.locker.snapshot().iter().any(|e| e.resource == "b"),
        "the lock on b expired from the table"
    );
    // No more refreshes: "a" expires 1 s after its last one, and both
    // charges lapse with it.
    let stopped = tokio::time::Instant::now();
    while node.stats.lock_bytes() > 0 {
        assert!(
            stopped.elapsed() < Duration::from_secs(5),
            "5 s after u's last refresh (validity 1 s), the server still charges {} bytes for \
             u's expired locks",
            node.stats.lock_bytes()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
