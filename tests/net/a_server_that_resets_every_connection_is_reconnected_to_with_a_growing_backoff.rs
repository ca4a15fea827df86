//! The background reconnect promises "a backoff that a server breaking
//! every connection at once cannot reset" (`client/reconnect.rs`). A
//! server (hostile, or broken: a proxy whose backend dies on each client)
//! that welcomes every connection and then resets it breaks every
//! connection at once: the client must back off further each time, as it
//! does when a server garbles each connection, not reconnect at the first
//! step of its backoff (every 0 to 50 ms) for as long as the locker lives.
//!
//! Reproduces a past break: only a connection ended by a frame that is no
//! response counts as short-lived (`Ended::Garbled`); one ended by a reset
//! (`Ended::Otherwise`) leaves the count at 0, so each reconnect starts its
//! backoff from the first step again.
#![cfg(feature = "net")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker};

use crate::stand_in;

/// How long the client is watched.
const WATCHED: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_resets_each_connection_is_not_reconnected_to_at_the_first_step() {
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
                if stand_in::welcome(&mut stream).await {
                    // Time for the client to read the welcome.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                stand_in::reset(stream);
            });
        }
    });

    // The default backoff: 50 ms growing to 2 s.
    let mut config = RemoteConfig::new(stand_in::TOKEN);
    config.connect_timeout = Duration::from_millis(500);
    let locker = RemoteLocker::connect(addr, config)
        .await
        .expect("the first connection is welcomed");
    let start = accepted.load(Ordering::Relaxed);
    tokio::time::sleep(WATCHED).await;
    let made = accepted.load(Ordering::Relaxed) - start;
    drop(locker);
    server.abort();
    // A backoff doubling from 50 ms makes 6 attempts at most in 2 s (its
    // ceilings sum to 3.15 s by the sixth), plus the time each takes.
    assert!(
        made <= 10,
        "in {WATCHED:?}, a server that resets each connection after its welcome was connected to \
         {made} times: the backoff never grows"
    );
}
