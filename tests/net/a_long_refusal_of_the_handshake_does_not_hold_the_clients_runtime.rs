//! Reproduces a past break: a server that refuses the handshake with a reason of two megabytes holds the client's runtime thread for seconds, searching the whole reason for the token, window by window, before it cuts the reason to the 2 KiB it shows.
//!
//! docs/lock-servers.md, "Threat model", a hostile server (or, without
//! TLS, anyone answering in its place): it "cannot reach beyond what the
//! library returns"; the text it sends is escaped before it enters an
//! error or a log, and at most 2 KiB of it is shown (`escape_peer_text`).
//!
//! What happens instead: a `Welcome::Rejected` reason, up to the 2 MiB
//! frame limit, goes whole through `recording::without_token`, which
//! compares each 8-byte window of the reason with each 8-byte window of
//! the token (`text.windows(8).position(|w| token.windows(8).any(..))`):
//! reason length times token length, synchronously, inside the connect
//! future. Only then is it masked and cut to 2 KiB. With a token of 256
//! bytes (tokens may be up to 4 KiB) that is over a second in a release
//! build (25 s with a 4000-byte token), more in a debug one, at every
//! handshake the server refuses so; on a current-thread runtime nothing
//! else runs meanwhile (the application's other tasks, the refreshes of
//! the locks it holds).
//!
//! A stand-in on 127.0.0.1 answers each hello with such a refusal. A
//! ticker task on the same current-thread runtime records the longest gap
//! between its 10 ms ticks while the client connects. Real time
//! (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quorum_lock::net::{RemoteConfig, RemoteLocker};
use tokio::io::AsyncWriteExt;

use crate::{stand_in, wire};

/// The token's length: a long token, well within the 4 KiB a hello holds.
const TOKEN_LEN: usize = 256;

/// The longest the runtime may be held: far more than escaping and
/// cutting a refusal needs, far less than scanning two megabytes for each
/// window of the token takes.
const HELD_BOUND: Duration = Duration::from_secs(1);

#[tokio::test]
async fn a_long_refusal_of_the_handshake_does_not_hold_the_clients_runtime() {
    let (listener, addr) = stand_in::bind().await;
    // Just under the frame limit, with no run of eight bytes of the token.
    let reason = "aaaaaaab".repeat(((2 << 20) - 64) / 8);
    let peer = tokio::spawn(async move {
        for _ in 0..4 {
            let Some(mut stream) = stand_in::accept_hello(&listener).await else {
                return;
            };
            let _ = stream
                .write_all(&wire::frame(&wire::rejected(&reason)))
                .await;
        }
    });
    let longest = Arc::new(Mutex::new(Duration::ZERO));
    let ticker = {
        let longest = longest.clone();
        tokio::spawn(async move {
            let mut last = Instant::now();
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                let now = Instant::now();
                let mut longest = longest.lock().unwrap();
                *longest = (*longest).max(now - last);
                last = now;
            }
        })
    };
    // Let the ticker start.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut config = RemoteConfig::new("a".repeat(TOKEN_LEN));
    config.connect_timeout = Duration::from_secs(60);
    config.call_timeout = Duration::from_secs(60);
    let began = Instant::now();
    let _ = tokio::time::timeout(
        Duration::from_secs(120),
        RemoteLocker::connect(addr.clone(), config),
    )
    .await;
    let took = began.elapsed();
    // One more tick, so that a gap that ends with the connect is counted.
    tokio::time::sleep(Duration::from_millis(50)).await;
    ticker.abort();
    peer.abort();
    let held = *longest.lock().unwrap();
    assert!(
        held <= HELD_BOUND,
        "the client's runtime was held for {held:?} (the connect took {took:?}) by one \
         handshake refusal of {} bytes, with a token of {TOKEN_LEN} bytes",
        (2 << 20) - 64
    );
}
