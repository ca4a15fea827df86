//! docs/lock-servers.md: a `RemoteLocker` whose connection the server
//! closed for idleness "does not reconnect at once: its next call opens a
//! connection first (taking up to `connect_timeout`), and `is_online()`
//! stays true meanwhile". While that call's reopen is under way against a
//! server that is up (only slow to answer the handshake), the locker must
//! still say it is online.
//!
//! Reproduces a past break: the locker said it was offline while its reopen ran.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::NetLocker;
use tokio::sync::oneshot;

use crate::stand_in::{self, args};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locker_is_online_while_its_next_call_reopens_the_connection() {
    let (listener, addr) = stand_in::bind().await;
    let (hello_tx, hello_rx) = oneshot::channel::<()>();
    let (answer_tx, answer_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let first = stand_in::accept_hello(&listener).await.expect("hello");
        stand_in::welcome_then_close_as_idle(first).await;
        // The reopen: welcomed only when told.
        let mut second = stand_in::accept_hello(&listener).await.expect("hello");
        let _ = hello_tx.send(());
        let _ = answer_rx.await;
        assert!(stand_in::welcome(&mut second).await);
        stand_in::grant_all(second).await;
    });

    let mut config = stand_in::config();
    config.connect_timeout = Duration::from_secs(3);
    let locker = Arc::new(RemoteLocker::connect(addr, config).await.expect("connect"));
    assert!(
        stand_in::until_connected(&locker, false).await,
        "the idle close"
    );
    assert!(locker.is_online(), "online after the idle close");

    let calling = locker.clone();
    let call = tokio::spawn(async move { calling.lock(&args("uid")).await });
    tokio::time::timeout(Duration::from_secs(5), hello_rx)
        .await
        .expect("the call began its reopen")
        .expect("server alive");
    let online_during_reopen = locker.is_online();
    let _ = answer_tx.send(());
    let answered = tokio::time::timeout(Duration::from_secs(5), call).await;
    server.abort();
    assert!(
        matches!(answered, Ok(Ok(Ok(true)))),
        "the call after the reopen: {answered:?}"
    );
    assert!(
        online_during_reopen,
        "the locker said it was offline while its next call reopened the connection to a \
         server that is up"
    );
}
