//! A program with one current-thread runtime drives it only inside each
//! call's `block_on`; its calls give up after a while (their own timeout,
//! or a `Dsync` whose quorum settled without this server, which drops the
//! call). The `RemoteLocker` rustdoc ("Runtimes"): where no task runs the
//! attempts, "the first call that finds an attempt overdue makes it
//! itself, taking up to the connect timeout". Here the server is back and
//! finishes each handshake in 300 ms, well within the connect timeout
//! (500 ms); each call waits 150 ms. A reopen after an idle close is a
//! task of its own, which each such call drives a little further until it
//! connects; so must the reconnect of an offline locker get there.
//!
//! The overdue attempt is made inside the call (`overdue_attempt`), not
//! as a task: a call that gives up drops its half-made connection, and
//! leaves itself as the runner, so for the patience that follows every
//! call fails at once and no task is started (`reconnect_later` sees a
//! runner showing progress); the background task, superseded by the
//! call, ended. The next call past the patience starts from nothing
//! again and gives up again: calls fail for ever with the server up.
//!
//! Reproduces a past break: an overdue attempt made inside the call died with each caller that gave up.
#![cfg(feature = "net")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::{NetLocker, RetryPolicy};
use tokio::net::TcpListener;

use crate::calls_in_a_block_on::{
    a_stand_in_on_a_runtime_of_its_own, an_offline_locker_on_a_current_thread_runtime,
    calls_until_one_is_granted,
};
use crate::stand_in::{self, args};

#[test]
fn calls_that_give_up_from_a_current_thread_runtime_get_through_to_a_slow_server() {
    // The server, on a runtime of its own: the first connection is reset
    // before any welcome (the server is not back yet); every later one is
    // welcomed 300 ms after its hello, then granted all it asks.
    let (server_runtime, listener, addr) = a_stand_in_on_a_runtime_of_its_own();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = accepted.clone();
    let server = server_runtime.spawn(a_server_that_is_not_back_yet_then_slow(listener, counted));

    let mut config = stand_in::config();
    config.reconnect = RetryPolicy {
        initial: Duration::from_millis(50),
        max: Duration::from_millis(200),
    };
    // The caller's only runtime.
    let (runtime, locker) = an_offline_locker_on_a_current_thread_runtime(addr, config);

    // One call every 100 ms for at most 8 s, each in a `block_on` of its
    // own, each given up after 150 ms.
    let (calls, last) =
        calls_until_one_is_granted(&runtime, &locker, 80, Duration::from_millis(150));
    let attempts = accepted.load(Ordering::Relaxed);
    drop(locker);
    drop(runtime);
    server.abort();
    drop(server_runtime);
    assert!(
        last.is_none(),
        "{calls} calls from a current-thread runtime, each driving it for up to 150 ms, never \
         got through in 8 s to a server that is up and finishes each handshake in 300 ms (the \
         connect timeout is 500 ms); {attempts} connections were begun; the last call: {}",
        last.unwrap_or_default()
    );
}

/// The same on a runtime that is driven all the time (a test's
/// multi-threaded one), once the runtime the reconnect task ran on has
/// shut down: every call that finds an attempt overdue makes it itself
/// rather than start a task, and gives up before it ends, so no attempt
/// ever ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_that_give_up_from_a_driven_runtime_get_through_to_a_slow_server() {
    let (listener, addr) = stand_in::bind().await;
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = accepted.clone();
    let server = tokio::spawn(a_server_that_is_not_back_yet_then_slow(listener, counted));

    let mut config = stand_in::config();
    config.reconnect = RetryPolicy {
        initial: Duration::from_millis(50),
        max: Duration::from_millis(200),
    };
    // Made on a runtime that then shuts down, with its reconnect task.
    let locker = tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let locker = runtime.block_on(RemoteLocker::connect(addr, config));
        drop(runtime);
        locker
    })
    .await
    .expect("the connecting thread")
    .expect("an unreachable server leaves the locker offline, not an error");
    assert!(locker.connect_error().is_some(), "it starts offline");

    // One call every 100 ms for at most 8 s, each given up after 150 ms.
    let mut last = None;
    let mut calls = 0;
    for _ in 0..80 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        calls += 1;
        let call =
            tokio::time::timeout(Duration::from_millis(150), locker.lock(&args("uid"))).await;
        match call {
            Ok(Ok(true)) => {
                last = None;
                break;
            }
            other => last = Some(format!("{other:?}")),
        }
    }
    let attempts = accepted.load(Ordering::Relaxed);
    drop(locker);
    server.abort();
    assert!(
        last.is_none(),
        "{calls} calls from a driven runtime, each given up after 150 ms, never got through in \
         8 s to a server that is up and finishes each handshake in 300 ms (the connect timeout \
         is 500 ms); {attempts} connections were begun; the last call: {}",
        last.unwrap_or_default()
    );
}

/// The stand-in server of both tests: the first connection is reset before
/// any welcome (the server is not back yet); every later one is counted in
/// `counted` and welcomed 300 ms after its hello, then granted all it asks.
async fn a_server_that_is_not_back_yet_then_slow(listener: TcpListener, counted: Arc<AtomicUsize>) {
    if let Some(first) = stand_in::accept_hello(&listener).await {
        stand_in::reset(first);
    }
    while let Ok((mut stream, _)) = listener.accept().await {
        counted.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            if crate::wire::read_frame(&mut stream, 4096).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            if stand_in::welcome(&mut stream).await {
                stand_in::grant_all(stream).await;
            }
        });
    }
}
