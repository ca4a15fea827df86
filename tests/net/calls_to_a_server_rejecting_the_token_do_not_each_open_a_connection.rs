//! The background reconnect "keeps probing with backoff" (`RemoteLocker`)
//! and "stops when ... the token is rejected" (`reconnect_later`). A
//! server that accepted the locker's token and later rejects it (its
//! token was changed) must not be dialled once per call: calls to the
//! offline locker "fail at once", and the attempts they cause must back
//! off like any other.
//!
//! Once a reconnect task ends on the rejection, it frees the reconnect
//! slot; each later call finds no reconnect under way and starts a new
//! one, from the first backoff step, which dials the server again (and
//! logs "giving up" again): one handshake, one rejection and one error
//! line per call, as fast as the calls come.
//!
//! Reproduces a past break: each call restarted the reconnect from its first step, one handshake per call.
#![cfg(feature = "net")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::{NetLocker, RetryPolicy};
use tokio::io::AsyncWriteExt;

use crate::stand_in::{self, args};
use crate::wire;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_against_a_server_rejecting_the_token_back_off() {
    let (listener, addr) = stand_in::bind().await;
    let rejected = Arc::new(AtomicUsize::new(0));
    let counted = rejected.clone();
    let server = tokio::spawn(async move {
        // The first connection is welcomed, then reset: the server
        // restarts with another token.
        let mut first = stand_in::accept_hello(&listener).await.expect("hello");
        assert!(stand_in::welcome(&mut first).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
        stand_in::reset(first);
        // Every later hello is refused for its token.
        while let Some(mut stream) = stand_in::accept_hello(&listener).await {
            counted.fetch_add(1, Ordering::AcqRel);
            let _ = stream
                .write_all(&wire::frame(&wire::rejected("invalid token")))
                .await;
        }
    });

    let mut config = stand_in::config();
    config.reconnect = RetryPolicy {
        initial: Duration::from_millis(50),
        max: Duration::from_secs(2),
    };
    let locker = RemoteLocker::connect(addr, config).await.expect("connect");
    assert!(stand_in::until_connected(&locker, false).await, "the reset");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = rejected.load(Ordering::Acquire);

    // 80 calls over 2 s, as an application retrying its locks makes them.
    for _ in 0..80 {
        let _ = tokio::time::timeout(Duration::from_secs(1), locker.lock(&args("uid"))).await;
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let during = rejected.load(Ordering::Acquire) - before;
    drop(locker);
    server.abort();
    // A backoff from 50 ms doubling to 2 s dials at most about 6 times in
    // 2 s; twice that leaves room.
    assert!(
        during <= 12,
        "80 calls in 2 s to a locker whose server rejects its token made {during} handshakes \
         there"
    );
}
