//! Reproduces a past break: the server touched a uid's charges as a whole, so a refresh of one lock of a uid kept the charge of another lock of that uid, long expired, for as long as the client refreshed.
//!
//! docs/lock-servers.md, "Limits and memory": "A lock stays counted until
//! it is released [...], or until it expired and the locker's next expiry
//! pass (every second, or every validity when that is shorter) gave back
//! its memory".
//!
//! A server over a locker of a 1 s validity. `u` takes a lock on "a" and,
//! under the same uid, another on "b" (the server charges a lock by its
//! exact set of names, so these are two charges of one uid). The client
//! refreshes the lock on "a" only; the lock on "b" expires and the table
//! drops it, and the charge of "b" must go though "a" is refreshed: within
//! the documented bound, the validity and two expiry passes (3 s), then
//! the server's next sweep of its charges (every validity, 1 s). Real time
//! (sockets), every wait bounded (about 5.5 s in all).
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::{LockerConfig, NetLocker};

use crate::node::{args, remote, start_over, TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lock_of_a_uid_is_not_charged_while_another_lock_of_the_uid_is_refreshed() {
    let locker = LockerConfig {
        validity: Duration::from_secs(1),
        quarantine: Duration::ZERO,
    };
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
    // Refresh "a" every 200 ms for 5.4 s: "b" expires after 1 s, and the
    // locker's expiry passes (every validity) drop it.
    for _ in 0..27 {
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
    assert_eq!(
        node.stats.lock_bytes(),
        only_a,
        "u's lock on b expired 4.4 s ago (validity 1 s), yet its charge stays while u's lock on a \
         is refreshed (the lock on a alone was charged {only_a} bytes)"
    );
}
