//! docs/lock-servers.md (Limits): "A connection may hold at most 1024
//! places in line" and "every place the table keeps is counted by an open
//! connection". Here a waiter keeps a reservation on some names, then the
//! same uid is granted a plain lock on another name over the same
//! connection.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{args, remote, reservation, start, TOKEN};
use quorum_lock::net::ServerConfig;
use quorum_lock::{LockMode, NetLocker, WaitReply};

#[tokio::test]
async fn a_place_is_not_kept_once_its_uid_was_granted_elsewhere_and_its_connection_closed() {
    let node = start(ServerConfig::new(TOKEN)).await;
    let holder = remote(&node).await;
    let held = vec!["held".to_string()];
    assert!(holder.lock(&args("holder", &held)).await.unwrap());

    let waiter = remote(&node).await;
    let both = vec!["held".to_string(), "other".to_string()];
    let reply = waiter
        .lock_wait(&args("w", &both), LockMode::Write, &reservation())
        .await;
    assert_eq!(reply.unwrap(), WaitReply::Refused);
    // The same uid, a plain lock on a free name, then its release.
    let free = vec!["free".to_string()];
    assert!(waiter.lock(&args("w", &free)).await.unwrap());
    assert!(waiter.unlock(&args("w", &free)).await.unwrap());
    drop(waiter);
    tokio::time::sleep(Duration::from_millis(200)).await;

    let places = node.locker.waiting();
    assert!(holder.unlock(&args("holder", &held)).await.unwrap());
    let newcomer = remote(&node)
        .await
        .lock_wait(&args("newcomer", &held), LockMode::Write, &reservation())
        .await;
    assert_eq!(
        places, 0,
        "the only connection that asked for the place closed, yet the table keeps {places} \
         place(s); a newcomer on the freed name got {newcomer:?}"
    );
}

/// One open connection allowed 2 places in line keeps 50 requests' places
/// in the table: each request's uid is then granted a plain lock on a
/// free name, which makes the connection forget the place.
#[tokio::test]
async fn a_connection_cannot_keep_more_places_than_its_limit_by_taking_plain_locks() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_waiters_per_connection = 2;
    let node = start(config).await;
    let holder = remote(&node).await;
    let held = vec!["held".to_string()];
    assert!(holder.lock(&args("holder", &held)).await.unwrap());

    let client = remote(&node).await;
    for step in 0..50usize {
        let uid = format!("w{step:03}");
        let names = vec!["held".to_string(), format!("n{step:03}")];
        let reply = client
            .lock_wait(&args(&uid, &names), LockMode::Write, &reservation())
            .await;
        assert_eq!(reply.unwrap(), WaitReply::Refused, "step {step}");
        let free = vec![format!("free{step:03}")];
        assert!(
            client.lock(&args(&uid, &free)).await.unwrap(),
            "step {step}"
        );
        assert!(
            client.unlock(&args(&uid, &free)).await.unwrap(),
            "step {step}"
        );
    }
    let places = node.locker.waiting();
    // Two names per request, at most two requests.
    assert!(
        places <= 4,
        "one open connection allowed 2 places in line keeps {places} places (per name) in the \
         table"
    );
}
