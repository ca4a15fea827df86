//! docs/lock-servers.md, "Limits and memory": "a leader's proclamation
//! counts its value, name and uid plus about 840 bytes against the
//! leader's lock, and goes with its release".
//!
//! `u` holds the write lock on "e" and "f" (one set) and proclaims on "e",
//! which it holds: the table keeps the proclamation, and the ledger
//! charges it under the hash of the set ["e"]. `u` then releases its lock
//! on "e" and "f": the table drops the proclamation with the entry, but
//! the ledger gives back only the proclamations charged under the
//! released set's hash (`Gone::Set`), so the proclamation stays charged
//! until `u`'s charge lapses, a validity and an expiry pass later. Real
//! time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::{NetLocker, Proclamation};

use crate::node::{args, remote, start, TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proclamation_on_one_name_of_a_larger_lock_goes_with_its_release() {
    let node = start(ServerConfig::new(TOKEN)).await;
    let client = remote(&node).await;
    let within = Duration::from_secs(5);
    let lock = args("u", &["e".to_owned(), "f".to_owned()]);
    let call = tokio::time::timeout(within, client.lock(&lock));
    assert!(call
        .await
        .expect("u's lock on e and f: an answer within 5 s")
        .unwrap());
    let election = args("u", &["e".to_owned()]);
    let p = Proclamation::new(1, 0, &b"value"[..]).expect("a proclamation");
    let call = tokio::time::timeout(within, client.proclaim(&election, &p));
    assert_eq!(
        call.await.expect("u's proclamation: an answer within 5 s"),
        Ok(true),
        "u holds e: its proclamation is kept"
    );
    assert!(node.stats.lock_bytes() > 0, "lock and proclamation charged");
    let call = tokio::time::timeout(within, client.unlock(&lock));
    assert!(call
        .await
        .expect("u's release: an answer within 5 s")
        .unwrap());
    let call = tokio::time::timeout(within, client.leader(&election, None));
    assert_eq!(
        call.await.expect("the leader of e: an answer within 5 s"),
        Ok(None),
        "the proclamation went with the entry"
    );
    assert_eq!(
        node.stats.lock_bytes(),
        0,
        "u released its only lock, and with it the proclamation it made on one of its names, \
         yet the server still charges bytes for them"
    );
}
