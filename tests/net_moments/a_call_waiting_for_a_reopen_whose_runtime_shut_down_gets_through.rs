//! Reproduces a past break: a call waiting for a reopen whose runtime shut down as it connected failed, told "the server closed the connection as it opened", with the server up.
//!
//! The `RemoteLocker` rustdoc ("Runtimes"): when the runtime a connection
//! runs on shuts down, "the next call connects again from its own
//! runtime"; calls made while a reopen runs wait for it, and a caller that
//! gives up does not stop it. Here a reopen after an idle close runs on a
//! runtime of its caller's, which shuts down just as the reopen has its
//! connection: the connection's reader and writer are dropped with that
//! runtime before the reopen installs it. A call from another, driven
//! runtime was waiting for that reopen. The server is up and welcomes
//! every connection, yet that call fails, and its error blames the server
//! ("the server closed the connection as it opened", where ccdad0a said
//! only that the connection closed) although the server closed nothing.
//!
//! The moment is pinned with the reopen's own debug line ("reconnected
//! after the server closed an idle connection", logged between its
//! handshake and its install): a subscriber on that runtime's worker
//! threads holds the reopen there until the runtime has shut down.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::NetLocker;

use crate::hold_at_log_line::HoldAtLogLine;
use crate::stand_in::{self, args};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_for_a_reopen_whose_runtime_shut_down_connects() {
    let (listener, addr) = stand_in::bind().await;
    let server = tokio::spawn(async move {
        let first = stand_in::accept_hello(&listener).await.expect("hello");
        stand_in::welcome_then_close_as_idle(first).await;
        stand_in::welcome_and_grant_every_connection(listener).await;
    });
    let locker = stand_in::connected_until_the_idle_close(addr).await;

    let HoldAtLogLine {
        dispatch,
        reached: reached_rx,
        release: release_tx,
    } = HoldAtLogLine::new("reconnected after the server closed an idle connection");

    // The caller's runtime: its workers log to the subscriber above.
    let for_workers = dispatch.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || {
            std::mem::forget(tracing::dispatcher::set_default(&for_workers));
        })
        .build()
        .expect("runtime");
    // tracing caches for the whole process whether a log statement is
    // wanted; with a single subscriber registered it asks only the
    // rebuilding thread's default, so the cache is rebuilt with this one as
    // the default.
    tracing::dispatcher::with_default(&dispatch, tracing::callsite::rebuild_interest_cache);
    let caller = locker.clone();
    let _first_call = runtime.spawn(async move {
        let _ = caller.lock(&args("uid-on-the-runtime")).await;
    });
    // The reopen has its connection (reader and writer on that runtime),
    // not yet installed.
    let reached = tokio::task::spawn_blocking(move || {
        reached_rx.recv_timeout(Duration::from_secs(5)).is_ok()
    })
    .await
    .expect("waiting thread");
    assert!(
        reached,
        "set-up: the reopen on the caller's runtime got its connection"
    );

    // A call from this runtime waits for that reopen.
    let waiter = locker.clone();
    let waiting = tokio::spawn(async move {
        tokio::time::timeout(Duration::from_secs(4), waiter.lock(&args("uid-waiting"))).await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;

    // The caller's runtime shuts down; its idle tasks (the connection's
    // reader and writer) are dropped; then the reopen goes on.
    tokio::task::spawn_blocking(move || runtime.shutdown_background())
        .await
        .expect("shut down");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = release_tx.send(());

    let call = waiting.await.expect("the waiting call's task");
    server.abort();
    drop(dispatch);
    assert!(
        matches!(call, Ok(Ok(true))),
        "a call waiting for a reopen whose runtime shut down fails with the server up and \
         welcoming every connection (the server closed nothing): {call:?}"
    );
}
