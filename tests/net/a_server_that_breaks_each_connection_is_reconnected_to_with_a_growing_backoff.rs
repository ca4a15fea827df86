//! docs/lock-servers.md: "a connection the server ends within 10 s of its
//! opening (by sending what is no response, by a reset, or by a close
//! while waits are registered on it) does not restart the reconnect
//! backoff from its first step, so a server that accepts every connection
//! and breaks it at once is reconnected to ever more slowly ... rather
//! than at once for ever"; only a close for idleness (a connection silent
//! for `idle_timeout`) is opened again by the next call at once.
//!
//! Each test has a hostile (or broken: a proxy whose backend dies on each
//! client) stand-in break every connection in one way, and counts the
//! connections the client opens in 2 s. The default backoff doubles from
//! 50 ms to 2 s: at most 6 attempts in 2 s (its ceilings sum to 3.15 s by
//! the sixth), plus the time each takes, so 10 is the bound.
#![cfg(feature = "net")]

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::NetLocker;
use tokio::net::TcpStream;

use crate::{stand_in, wire};

/// How long the client is watched.
const WATCHED: Duration = Duration::from_secs(2);

/// The most connections a growing backoff opens in [`WATCHED`].
const MOST: usize = 10;

/// Reproduces a past break: only a connection ended by a frame that is no
/// response counted as short-lived (`Ended::Garbled`); one ended by a reset
/// left the count at 0, so each reconnect started its backoff from the
/// first step again (every 0 to 50 ms) for as long as the locker lived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_resets_each_connection_is_not_reconnected_to_at_the_first_step() {
    let made = connections_opened(
        |mut stream| async move {
            if stand_in::welcome(&mut stream).await {
                // Time for the client to read the welcome.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            stand_in::reset(stream);
        },
        false,
    )
    .await;
    assert!(
        made <= MOST,
        "in {WATCHED:?}, a server that resets each connection after its welcome was connected to \
         {made} times: the backoff never grows"
    );
}

/// A server that reads the first request and closes the connection in
/// good order without answering it. That is no close for idleness (a
/// request was under way).
///
/// Reproduces a past break: every clean close under a call counted as idle, one new connection per call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_closes_each_connection_under_a_call_is_not_reconnected_to_per_call() {
    let made = connections_opened(
        |mut stream| async move {
            if !stand_in::welcome(&mut stream).await {
                return;
            }
            // The first request, then a close in good order, unanswered.
            let _ = tokio::time::timeout(
                Duration::from_secs(5),
                wire::read_frame(&mut stream, 1 << 20),
            )
            .await;
            stand_in::close_as_idle(stream).await;
        },
        true,
    )
    .await;
    assert!(
        made <= MOST,
        "in {WATCHED:?}, calls to a server that closes each connection under its first request \
         opened {made} connections: one per call, no backoff"
    );
}

/// A server that closes each connection in good order as it welcomes it,
/// before any request can reach it: the client's reader sees the end of
/// the stream with no call waiting, however short the connection lasted.
///
/// Reproduces a past break: every quiet close counted as idle, however soon, one new connection per call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_closes_each_connection_as_it_welcomes_it_is_not_reconnected_to_per_call() {
    let made = connections_opened(
        |mut stream| async move {
            if stand_in::welcome(&mut stream).await {
                // At once, in good order, before any request.
                stand_in::close_as_idle(stream).await;
            }
        },
        true,
    )
    .await;
    assert!(
        made <= MOST,
        "in {WATCHED:?}, calls to a server that closes each connection as it welcomes it opened \
         {made} connections: the backoff never applied"
    );
}

/// How many connections a locker with the default backoff opens in
/// [`WATCHED`] after its first, to a stand-in that runs `each` on every
/// connection it accepts; with `calling`, while a caller retries a lock
/// every 10 ms, as a lock's retry loop does (none may be answered).
async fn connections_opened<F, Fut>(each: F, calling: bool) -> usize
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (listener, addr) = stand_in::bind().await;
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = accepted.clone();
    let server = tokio::spawn(async move {
        for _ in 0..2_000 {
            let Some(stream) = stand_in::accept_hello(&listener).await else {
                return;
            };
            counted.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(each(stream));
        }
    });

    // The default backoff: 50 ms growing to 2 s.
    let mut config = RemoteConfig::new(stand_in::TOKEN);
    config.connect_timeout = Duration::from_millis(500);
    config.call_timeout = Duration::from_secs(1);
    let locker = RemoteLocker::connect(addr, config)
        .await
        .expect("the first connection is welcomed");
    let start = accepted.load(Ordering::Relaxed);
    let began = tokio::time::Instant::now();
    let (mut calls, mut answered) = (0, 0);
    let args = stand_in::args("u");
    if calling {
        while began.elapsed() < WATCHED && calls < 200 {
            calls += 1;
            let call = locker.lock(&args);
            if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(2), call).await {
                answered += 1;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    } else {
        tokio::time::sleep(WATCHED).await;
    }
    let made = accepted.load(Ordering::Relaxed) - start;
    drop(locker);
    server.abort();
    assert_eq!(answered, 0, "the stand-in answers nothing");
    eprintln!("{calls} calls, {made} connections");
    made
}
