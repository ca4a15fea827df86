//! Reproduces a past break: after a late connection's runtime shut down, calls fail at once for as long as the background task sleeps.
//!
//! The `RemoteLocker` rustdoc ("Runtimes"): when the runtime a connection
//! runs on shuts down, "the locker still counts as online" and "the next
//! call connects again from its own runtime, as after an idle close";
//! docs/lock-servers.md: "if that runtime shuts down, the next call
//! connects again from its own runtime".
//!
//! A reopen parked mid-handshake on an idle runtime; meanwhile a call's
//! own attempt fails and the background reconnect task starts, sleeping
//! through its backoff step (here up to an hour). The parked reopen then
//! runs, its connection is installed (the schedule is reset, the sleeping
//! task stays the runner), and its runtime shuts down. `reopen_next` is
//! set and `is_online()` is true, but a call may not reopen beside a
//! runner "showing progress" (`may_reopen`), and after such a close
//! `connection()` starts no task: every call fails at once, with the
//! server up, until the sleeping task wakes (to find nothing due, and end).
//!
//! The backoff step is drawn at random up to its ceiling of an hour: the
//! task wakes within this test's few seconds about once in a thousand
//! runs.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::{NetLocker, RetryPolicy};
use tokio::sync::oneshot;

use crate::stand_in::{self, args, IdleRuntime};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_call_connects_once_the_late_connections_runtime_shut_down() {
    let (listener, addr) = stand_in::bind().await;
    let (began_tx, began_rx) = oneshot::channel::<()>();
    let (parked_tx, parked_rx) = oneshot::channel::<tokio::net::TcpStream>();
    let (reset_tx, reset_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let first = stand_in::accept_hello(&listener).await.expect("hello");
        stand_in::welcome_then_close_as_idle(first).await;
        // The reopen that will be parked: its hello is read, not answered.
        let parked = stand_in::accept_hello(&listener).await.expect("hello");
        let _ = began_tx.send(());
        let _ = parked_tx.send(parked);
        // The attempt of a call on a driven runtime: reset.
        let refused = stand_in::accept_hello(&listener).await.expect("hello");
        stand_in::reset(refused);
        let _ = reset_tx.send(());
        // Any later connection is served.
        stand_in::welcome_and_grant_every_connection(listener).await;
    });

    let mut config = stand_in::config();
    config.reconnect = RetryPolicy {
        initial: Duration::from_secs(3600),
        max: Duration::from_secs(3600),
    };
    let locker = Arc::new(RemoteLocker::connect(addr, config).await.expect("connect"));
    assert!(
        stand_in::until_connected(&locker, false).await,
        "the idle close"
    );

    // A call on a current-thread runtime starts the reopen, and the
    // runtime stays idle with it parked mid-handshake.
    let mut idle = IdleRuntime::park_a_call(locker.clone(), "uid-parked", began_rx);
    let mut parked = tokio::time::timeout(Duration::from_secs(1), parked_rx)
        .await
        .expect("the parked reopen reached the server")
        .expect("its socket");

    // A call here waits out the parked reopen's time, then makes its own
    // attempt, which the server resets: the background task starts and
    // sleeps through its step.
    let refused = tokio::time::timeout(Duration::from_secs(5), locker.lock(&args("uid-refused")))
        .await
        .expect("the call in time");
    assert!(refused.is_err(), "the reset attempt fails: {refused:?}");
    tokio::time::timeout(Duration::from_secs(1), reset_rx)
        .await
        .expect("the reset in time")
        .expect("reset");
    assert!(!locker.is_online(), "offline after the failed attempt");

    // The parked reopen is welcomed and runs: its connection is installed.
    assert!(stand_in::welcome(&mut parked).await, "welcome");
    let late = tokio::spawn(stand_in::grant_all(parked));
    idle.drive_for(Duration::from_millis(300)).await;
    assert!(
        locker.protocol_version().is_some(),
        "the late connection is installed"
    );

    // Its runtime shuts down: the connection goes, the locker stays online.
    idle.shut_down().await;
    assert!(
        stand_in::until_connected(&locker, false).await,
        "the late connection is gone with its runtime"
    );
    assert!(locker.is_online(), "online: the next call connects");

    // The next call, made from this runtime with the server up.
    let next = tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid-next"))).await;
    // And one more, a second later.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let later = tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid-later"))).await;
    let online = locker.is_online();
    drop(locker);
    server.abort();
    late.abort();
    assert!(
        matches!(next, Ok(Ok(true))),
        "the next call after the late connection's runtime shut down, with the server up and \
         the locker online, got {next:?} (a second later: {later:?}; is_online: {online})"
    );
}
