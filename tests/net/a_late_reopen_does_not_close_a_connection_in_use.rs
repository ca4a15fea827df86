//! After the server closed an idle connection, a call on a current-thread
//! runtime that nobody drives may begin the reopen and park in it. A call
//! from another runtime then opens a connection of its own, which serves
//! the calls (the `RemoteLocker` rustdoc, "Runtimes"). When the parked
//! runtime is driven again, its reopen must not take that connection away
//! from a call waiting on it for its reply: the server is up and answers
//! it.
//!
//! Reproduces a past break: the late reopen closed the live connection a call waited on.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::NetLocker;
use tokio::sync::oneshot;

use crate::stand_in::{self, args, IdleRuntime};
use crate::wire;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopen_resumed_late_leaves_the_connection_a_call_waits_on() {
    let (listener, addr) = stand_in::bind().await;
    let (parked_hello_tx, parked_hello_rx) = oneshot::channel::<()>();
    let (answer_parked_tx, answer_parked_rx) = oneshot::channel::<()>();
    let (slow_call_tx, slow_call_rx) = oneshot::channel::<()>();
    let (answer_slow_tx, answer_slow_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let first = stand_in::accept_hello(&listener).await.expect("hello");
        stand_in::welcome_then_close_as_idle(first).await;
        // The reopen that will be parked: welcomed only when told.
        let mut parked = stand_in::accept_hello(&listener).await.expect("hello");
        let _ = parked_hello_tx.send(());
        tokio::spawn(async move {
            let _ = answer_parked_rx.await;
            if stand_in::welcome(&mut parked).await {
                stand_in::grant_all(parked).await;
            }
        });
        // The other runtime's connection: its first request is answered
        // only when told.
        let mut other = stand_in::accept_hello(&listener).await.expect("hello");
        tokio::spawn(async move {
            if !stand_in::welcome(&mut other).await {
                return;
            }
            let Ok(request) = wire::read_frame(&mut other, 1 << 20).await else {
                return;
            };
            let _ = slow_call_tx.send(());
            let _ = answer_slow_rx.await;
            if stand_in::grant(&mut other, &request).await {
                stand_in::grant_all(other).await;
            }
        });
        stand_in::welcome_and_grant_every_connection(listener).await;
    });

    let mut config = stand_in::config();
    config.call_timeout = Duration::from_secs(5);
    let locker = Arc::new(RemoteLocker::connect(addr, config).await.expect("connect"));
    assert!(
        stand_in::until_connected(&locker, false).await,
        "the idle close"
    );
    let mut idle = IdleRuntime::park_a_call(locker.clone(), "uid-parked", parked_hello_rx);

    // A call from this runtime opens a connection of its own.
    let waiting = locker.clone();
    let call = tokio::spawn(async move { waiting.lock(&args("uid-waiting")).await });
    tokio::time::timeout(Duration::from_secs(5), slow_call_rx)
        .await
        .expect("the call reached the server")
        .expect("server alive");

    // The parked reopen gets its welcome and its runtime is driven again.
    let _ = answer_parked_tx.send(());
    tokio::time::sleep(Duration::from_millis(100)).await;
    idle.drive_for(Duration::from_millis(500)).await;
    // Now the server answers the waiting call.
    let _ = answer_slow_tx.send(());
    let answered = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the call answered within its call timeout")
        .expect("task");
    drop(idle);
    server.abort();
    assert!(
        matches!(answered, Ok(true)),
        "a call waiting for its reply on a working connection failed when a reopen parked \
         on another runtime resumed: {answered:?}"
    );
}
