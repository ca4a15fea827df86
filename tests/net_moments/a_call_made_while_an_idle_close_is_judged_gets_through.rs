//! Reproduces a past break: a call made while an idle close was being judged (is_online() true) failed at once, with the server up, and started a background reconnect.
//!
//! docs/lock-servers.md: a `RemoteLocker` whose connection the server
//! closed for idleness "does not reconnect at once: its next call opens a
//! connection first ..., and `is_online()` stays true meanwhile. Calls
//! made while that reopen runs wait for it." Since 2127da2 `is_online()`
//! counts a connection whose end is being judged (`Connection::is_ending`)
//! as it was, but a call does not: one made in that moment finds no live
//! connection, no reopen flag yet and no attempt due, so it fails at once
//! ("not connected, reconnecting in the background") and starts the
//! background reconnect, which dials at once, whereas it is the next call
//! after an idle close that is to reopen.
//!
//! The moment is pinned with the library's "connection down" debug line,
//! logged as the connection goes down and before its owner judges how it
//! ended: a subscriber on the worker threads of the runtime the
//! connection runs on holds its reader there for 200 ms.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::NetLocker;

use crate::hold_at_log_line::HoldAtLogLine;
use crate::stand_in::{self, args};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_made_while_an_idle_close_is_judged_gets_through() {
    let (listener, addr) = stand_in::bind().await;
    let (close_tx, close_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let mut first = stand_in::accept_hello(&listener).await.expect("hello");
        assert!(stand_in::welcome(&mut first).await, "welcome");
        let _ = tokio::time::timeout(Duration::from_secs(5), close_rx).await;
        stand_in::close_as_idle(first).await;
        stand_in::welcome_and_grant_every_connection(listener).await;
    });

    let HoldAtLogLine {
        dispatch,
        reached: reached_rx,
        release: release_tx,
    } = HoldAtLogLine::new("connection down");
    // The runtime the connection runs on: its workers log to the
    // subscriber above.
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
    let locker = runtime
        .spawn(RemoteLocker::connect(addr, stand_in::config()))
        .await
        .expect("connect task")
        .expect("connect");
    assert!(
        stand_in::until_connected(&locker, true).await,
        "set-up: connected"
    );

    // The server closes the connection as idle; its reader is held as the
    // connection goes down, before its end is judged.
    let _ = close_tx.send(());
    let reached = tokio::task::spawn_blocking(move || {
        reached_rx.recv_timeout(Duration::from_secs(5)).is_ok()
    })
    .await
    .expect("waiting thread");
    assert!(
        reached,
        "set-up: the idle close reached the connection's reader"
    );
    let online = locker.is_online();

    let locker = std::sync::Arc::new(locker);
    let caller = locker.clone();
    let call = tokio::spawn(async move {
        tokio::time::timeout(
            Duration::from_secs(4),
            caller.lock(&args("uid-in-the-moment")),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = release_tx.send(());
    let call = call.await.expect("the call's task");

    server.abort();
    drop(locker);
    tokio::task::spawn_blocking(move || runtime.shutdown_background())
        .await
        .expect("shut down");
    drop(dispatch);
    assert!(
        online,
        "set-up: is_online() counts the connection being judged"
    );
    assert!(
        matches!(call, Ok(Ok(true))),
        "a call made while the idle close was judged (is_online() true) fails with the server \
         up and welcoming every connection: {call:?}"
    );
}
