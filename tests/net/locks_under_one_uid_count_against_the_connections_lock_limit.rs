//! src/net/config.rs: `max_entries_per_connection` is the "Most locks one
//! connection may hold at once; beyond it, lock requests are refused with
//! an error". docs/lock-servers.md, "Limits and memory": "Locks count
//! against their connection (100,000 locks or 64 MiB) [...] Our
//! coordinator takes each lock under a uid of its own; a client that puts
//! several locks under one uid only counts more against its own limits."
//!
//! A client with the ordinary token on a server whose connections may hold
//! 3 locks takes 20 locks, each on a name of its own, over one connection,
//! all under one uid. The ledger counts a connection's locks by uid (one
//! per charged uid, whatever number of sets it holds), so every one of
//! them is granted and stands in the table: the connection holds 20 locks
//! where it may hold 3. Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::NetLocker;

use crate::node::{args, remote, start, TOKEN};

#[tokio::test]
async fn locks_under_one_uid_count_against_the_connections_lock_limit() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_entries_per_connection = 3;
    let node = start(config).await;
    let client = remote(&node).await;
    let within = Duration::from_secs(5);
    let mut granted = 0;
    for i in 0..20 {
        let lock = args("u", &[format!("n{i}")]);
        match tokio::time::timeout(within, client.lock(&lock))
            .await
            .expect("an answer within 5 s")
        {
            Ok(true) => granted += 1,
            _ => break,
        }
    }
    let standing = node
        .locker
        .snapshot()
        .iter()
        .filter(|info| info.uid == "u")
        .count();
    assert_eq!(standing, granted, "every granted lock stands");
    assert!(
        granted <= 3,
        "a connection that may hold 3 locks holds {granted} locks (each its own lock call on a \
         name of its own, all under one uid: {standing} entries stand)"
    );
}
