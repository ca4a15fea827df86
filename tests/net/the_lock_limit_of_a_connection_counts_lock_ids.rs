//! src/net/config.rs: `max_entries_per_connection` is the "Most lock ids
//! (uids) one connection may hold locks under at once; beyond it, lock
//! requests of a new uid are refused with an error. Several locks under
//! one uid count once here (the byte limits below count each)."
//!
//! A review read the limit as counting locks, and found 20 locks under one
//! uid held where 3 were allowed; the docs now say what it counts. On a
//! server whose connections may hold locks under 3 uids, a client with the
//! ordinary token takes 20 locks under one uid, each on a name of its own,
//! then locks under two more uids, and is refused a fourth uid, with the
//! limit's error. Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::NetLocker;

use crate::node::{args, remote, start, TOKEN};

#[tokio::test]
async fn the_lock_limit_of_a_connection_counts_lock_ids() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_entries_per_connection = 3;
    let node = start(config).await;
    let client = remote(&node).await;
    let within = Duration::from_secs(5);
    let lock = |uid: &str, i: usize| args(uid, &[format!("n{i}")]);
    for i in 0..20 {
        let args = lock("u", i);
        let call = tokio::time::timeout(within, client.lock(&args));
        let granted = call.await.expect("an answer within 5 s");
        assert_eq!(granted, Ok(true), "lock {i} under the one uid u");
    }
    for (i, uid) in ["v", "w"].into_iter().enumerate() {
        let args = lock(uid, 100 + i);
        let call = tokio::time::timeout(within, client.lock(&args));
        let granted = call.await.expect("an answer within 5 s");
        assert_eq!(granted, Ok(true), "a lock under a second or third uid");
    }
    let args = lock("x", 200);
    let call = tokio::time::timeout(within, client.lock(&args));
    let refused = call.await.expect("an answer within 5 s");
    let err = refused.expect_err("a fourth uid is over the limit");
    assert!(err.to_string().contains("already holds 3 locks"), "{err}");
    let standing = node.locker.snapshot().len();
    assert_eq!(standing, 22, "20 locks under u, one each under v and w");
}
