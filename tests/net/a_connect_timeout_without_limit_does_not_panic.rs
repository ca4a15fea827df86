//! The reopen and the background reconnect take any connect timeout,
//! however long ("a connect timeout of years": `later` in
//! `client/reconnect.rs` saturates rather than overflow an instant), so
//! `Duration::MAX`, a natural way to say "no limit", is a configuration
//! they mean to serve. Opening a connection with it must not panic: the
//! locker connects to a server that answers at once.
//!
//! Reproduces a past break: `Connection::open` computes its deadline as
//! `Instant::now() + connect_timeout`, which panics on overflow, so
//! `RemoteLocker::connect` (and every reopen and reconnect) panics.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::NetLocker;

use crate::stand_in::{self, args};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locker_with_an_unbounded_connect_timeout_connects() {
    let (listener, addr) = stand_in::bind().await;
    let server = tokio::spawn(stand_in::welcome_and_grant_every_connection(listener));
    let mut config = stand_in::config();
    config.connect_timeout = Duration::MAX;
    // On a task of its own, so that a panic is seen as one.
    let connected = tokio::spawn(async move {
        let locker = RemoteLocker::connect(addr, config).await?;
        locker.lock(&args("uid")).await
    });
    let outcome = tokio::time::timeout(Duration::from_secs(5), connected).await;
    server.abort();
    match outcome {
        Ok(Ok(granted)) => assert_eq!(granted.ok(), Some(true), "the lock is granted"),
        Ok(Err(joined)) => panic!(
            "connecting with connect_timeout = Duration::MAX panicked: {}",
            joined
                .try_into_panic()
                .ok()
                .and_then(|p| p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())))
                .unwrap_or_default()
        ),
        Err(_) => panic!("connecting with connect_timeout = Duration::MAX took over 5 s"),
    }
}
