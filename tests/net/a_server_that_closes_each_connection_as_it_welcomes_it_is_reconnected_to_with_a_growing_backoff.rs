//! docs/lock-servers.md: a connection the server ends soon after its
//! opening does not restart the reconnect backoff, "so a server that
//! accepts every connection and breaks it at once is reconnected to ever
//! more slowly ... rather than at once for ever"; only a close for
//! idleness (a connection silent for `idle_timeout`) is opened again by
//! the next call at once.
//!
//! A hostile server welcomes each connection and closes it in good order
//! straight away, before any request can reach it. The client's reader
//! sees the end of the stream with no call waiting: `down()` says
//! `Ended::Quietly`, and `on_close` counts any quiet end with no wait
//! registered as an idle close however short the connection lasted (the
//! `lasted` test guards only `QuietlyUnderCalls`). It zeroes
//! `short_lived` and sets `reopen_next`, so the next call opens a
//! connection at once (two: `reopen::attempt` starts a second when the
//! first ends with a dead connection), and each connection's quiet end
//! starts it again. Every call fails, the backoff never applies: as many
//! connections a second as the caller makes calls.
//!
//! Reproduces a past break: every quiet close counted as idle, however soon, one new connection per call.
#![cfg(feature = "net")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::NetLocker;

use crate::stand_in;

/// How long the client keeps calling.
const WATCHED: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_closes_each_connection_as_it_welcomes_it_is_not_reconnected_to_per_call() {
    let (listener, addr) = stand_in::bind().await;
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = accepted.clone();
    let server = tokio::spawn(async move {
        for _ in 0..2_000 {
            let Some(mut stream) = stand_in::accept_hello(&listener).await else {
                return;
            };
            counted.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                if stand_in::welcome(&mut stream).await {
                    // At once, in good order, before any request.
                    stand_in::close_as_idle(stream).await;
                }
            });
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
    let mut calls = 0;
    let mut answered = 0;
    // A caller retrying every 10 ms, as a lock's retry loop does.
    while began.elapsed() < WATCHED && calls < 200 {
        calls += 1;
        if let Ok(Ok(_)) =
            tokio::time::timeout(Duration::from_secs(2), locker.lock(&stand_in::args("u"))).await
        {
            answered += 1;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let made = accepted.load(Ordering::Relaxed) - start;
    drop(locker);
    server.abort();
    assert_eq!(answered, 0, "the stand-in answers nothing");
    // A backoff doubling from 50 ms makes 6 attempts at most in 2 s (its
    // ceilings sum to 3.15 s by the sixth), plus the time each takes.
    assert!(
        made <= 10,
        "in {WATCHED:?}, {calls} calls to a server that closes each connection as it welcomes \
         it opened {made} connections: the backoff never applied"
    );
}
