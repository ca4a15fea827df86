//! docs/lock-servers.md: "a connection the server ends within 10 s of its
//! opening (by sending what is no response, by a reset, or by a close
//! while waits are registered on it) does not restart the reconnect
//! backoff from its first step, so a server that accepts every connection
//! and breaks it at once is reconnected to ever more slowly ... rather
//! than at once for ever. (A connection the server closed for idleness
//! ... starts the backoff afresh.)"
//!
//! A hostile server welcomes each connection, reads the first request and
//! closes the connection in good order without answering it. That is no
//! close for idleness (a request was under way; a server closes only a
//! connection silent for `idle_timeout`), yet `on_close` counts any end
//! in good order with no wait registered as one (`Ended::Quietly &&
//! pushes.is_idle()`): it zeroes `short_lived` and sets `reopen_next`, so
//! the next call opens a connection at once, with no backoff. Every call
//! fails and each opens a connection: as many connections a second as
//! the caller makes calls (a dsync retry loop makes one every few ms),
//! for as long as the server keeps it up.
//!
//! Reproduces a past break: every clean close under a call counted as idle, one new connection per call.
#![cfg(feature = "net")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::NetLocker;

use crate::{stand_in, wire};

/// How long the client keeps calling.
const WATCHED: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_closes_each_connection_under_a_call_is_not_reconnected_to_per_call() {
    let (listener, addr) = stand_in::bind().await;
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = accepted.clone();
    let server = tokio::spawn(async move {
        for _ in 0..1_000 {
            let Some(mut stream) = stand_in::accept_hello(&listener).await else {
                return;
            };
            counted.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
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
        "in {WATCHED:?}, {calls} calls to a server that closes each connection under its first \
         request opened {made} connections: one per call, no backoff"
    );
}
