//! Reproduces a past break: a refresh naming the names a uid waits on (it holds none of them) drops the charge of its place while the place stands, so a connection keeps places past its byte limit.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{args, start_over, TOKEN};
use quorum_lock::net::{RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LockMode, LockerConfig, NetLocker, Ticket, WaitArgs, WaitReply};

/// The names of the place of `uid`: 200 of its own and "held".
fn names(uid: &str) -> Vec<String> {
    let mut names: Vec<String> = (0..200).map(|i| format!("{uid}-n{i}")).collect();
    names.push("held".to_string());
    names
}

/// A place of `uid` on its names, kept 60 s.
async fn place(client: &RemoteLocker, uid: &str) -> Result<WaitReply, quorum_lock::Error> {
    let wait = WaitArgs {
        ticket: Ticket::now(),
        place_ttl: Duration::from_secs(60),
        wake: None,
    };
    tokio::time::timeout(
        Duration::from_secs(10),
        client.lock_wait(&args(uid, &names(uid)), LockMode::Write, &wait),
    )
    .await
    .expect("an answer within 10 s")
}

/// docs/lock-servers.md: "A place is charged as a lock is while its
/// connection keeps it", and per connection at most
/// `max_bytes_per_connection`; "A refresh that finds none of its names
/// held refreshes no charge". A holder keeps "held"; a client fills its
/// connection with places of 201 names until the byte limit refuses one,
/// then sends a refresh of each waiting uid with its names. The locker
/// holds none of them (a refresh refreshes entries, not places) and
/// answers false, and the server takes that as "nothing of the uid left
/// on these names" and drops the set's charge: the very charge of the
/// place that still stands. The connection then gets as many places
/// again while the table keeps every earlier one. Bounded: each call
/// 10 s, 200 places each round, all well within the 60 s validity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_of_a_waiting_uid_keeps_its_places_charge() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_bytes_per_connection = 2 * 1024 * 1024;
    let node = start_over(LockerConfig::default(), config).await;
    let locker = node.locker.clone();
    let stats = node.stats.clone();
    let connect = || RemoteLocker::connect(node.addr.clone(), RemoteConfig::new(TOKEN));
    let holder = connect().await.unwrap();
    assert!(holder
        .lock(&args("holder", &["held".to_string()]))
        .await
        .unwrap());
    let client = connect().await.unwrap();
    let mut kept = 0;
    while kept < 200 {
        match place(&client, &format!("a{kept}")).await {
            Ok(WaitReply::Refused) => kept += 1,
            Ok(other) => panic!("a reservation, not {other:?}"),
            Err(_) => break,
        }
    }
    assert!(
        kept > 0 && kept < 200,
        "the byte limit refused place {kept}"
    );
    let charged = stats.lock_bytes();
    for i in 0..kept {
        let uid = format!("a{i}");
        let refreshed = tokio::time::timeout(
            Duration::from_secs(10),
            client.refresh(&args(&uid, &names(&uid))),
        )
        .await
        .expect("an answer within 10 s");
        assert!(
            !matches!(refreshed, Ok(true)),
            "a place is no lock: {refreshed:?}"
        );
    }
    let mut more = 0;
    while more < 200 {
        match place(&client, &format!("b{more}")).await {
            Ok(WaitReply::Refused) => more += 1,
            Ok(other) => panic!("a reservation, not {other:?}"),
            Err(_) => break,
        }
    }
    let places = locker.waiting();
    assert!(
        places <= kept * 201,
        "the connection kept {kept} places up to its byte limit ({charged} bytes charged), then \
         {more} more after refreshing the waiting uids, while the table kept them all ({places} \
         places on names, {} bytes charged)",
        stats.lock_bytes()
    );
    drop(node);
}
