//! docs/lock-servers.md, "Limits and memory": "Every limit gets a clear
//! error that names it", and "Locks count against their connection
//! (100,000 locks or 64 MiB)"; the threat model allows one exception: "a
//! refresh over another connection moves the charge there even past that
//! connection's own limits, since refusing it would cost a holder that
//! reconnected its lock".
//!
//! A lock of new names is no refresh: refusing it costs nobody a lock.
//! Yet with a limit of one lock per connection, connection 2, which holds
//! `w`'s lock, is granted a lock on "c" under the uid `u`, whose lock on
//! "a" connection 1 holds. The ledger checks connection 2's limits for the
//! new set alone (`new_uid` is false, so the count of locks is not
//! checked), then moves all of `u`'s charge there (`adopt`): connection 2
//! counts two locks under a limit of one, for as long as its client
//! refreshes them, and connection 1, counting none, may take another.
//! Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::NetLocker;

use crate::node::{args, remote, start, TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_of_new_names_under_a_uid_held_elsewhere_is_limited_as_its_connection_will_count_it()
{
    let mut config = ServerConfig::new(TOKEN);
    config.max_entries_per_connection = 1;
    let node = start(config).await;
    let (first, second) = (remote(&node).await, remote(&node).await);
    let within = Duration::from_secs(5);
    let lock = args("u", &["a".to_owned()]);
    let call = tokio::time::timeout(within, first.lock(&lock));
    assert!(call
        .await
        .expect("u's lock on a: an answer within 5 s")
        .unwrap());
    let lock = args("w", &["b".to_owned()]);
    let call = tokio::time::timeout(within, second.lock(&lock));
    assert!(call
        .await
        .expect("w's lock on b: an answer within 5 s")
        .unwrap());
    // Connection 2 is at its limit of one lock.
    let lock = args("x", &["d".to_owned()]);
    let call = tokio::time::timeout(within, second.lock(&lock));
    let refused = call.await.expect("x's lock on d: an answer within 5 s");
    assert!(
        !matches!(refused, Ok(true)),
        "the limit of one lock per connection holds for a new uid"
    );
    let lock = args("u", &["c".to_owned()]);
    let call = tokio::time::timeout(within, second.lock(&lock));
    let granted = call.await.expect("u's lock on c: an answer within 5 s");
    // What follows if it is granted: connection 1 counts nothing now.
    let lock = args("y", &["e".to_owned()]);
    let call = tokio::time::timeout(within, first.lock(&lock));
    let more = call.await.expect("y's lock on e: an answer within 5 s");
    assert!(
        !matches!(granted, Ok(true)),
        "connection 2, holding w's lock under a limit of one lock per connection, was granted a \
         lock of new names under u (whose lock connection 1 holds), and now counts two locks; \
         connection 1 was then granted another: {more:?} (3 locks over 2 connections)"
    );
}
