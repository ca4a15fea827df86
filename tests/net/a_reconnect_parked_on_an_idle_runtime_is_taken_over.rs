//! The background reconnect runs on the runtime of the call that found
//! the server down, and that may be a current-thread runtime nobody
//! drives afterwards. Calls from other runtimes must not fail "not
//! connected" for ever behind that parked task once the server is up: a
//! reconnect that has shown no progress for longer than its longest step
//! (the backoff's ceiling or the connect timeout) counts as parked, and
//! the next call starts another.
//!
//! Reproduces a past limit: the parked reconnect held the reconnect for as
//! long as its runtime was neither driven nor dropped.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::{NetLocker, RetryPolicy};

use crate::stand_in::{self, args};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_from_a_driven_runtime_reconnects_past_a_parked_reconnect() {
    let (listener, addr) = stand_in::bind().await;
    let server = tokio::spawn(async move {
        // The first handshake is never answered: the locker starts
        // offline, its reconnect on the runtime that connected.
        let unanswered = stand_in::accept_hello(&listener).await;
        stand_in::welcome_and_grant_every_connection(listener).await;
        drop(unanswered);
    });

    let mut config = stand_in::config();
    config.reconnect = RetryPolicy {
        initial: Duration::from_millis(50),
        max: Duration::from_millis(200),
    };
    // Connected on a current-thread runtime that is then left idle (not
    // dropped) until the test ends.
    let (locker, idle) = stand_in::connect_on_an_idle_runtime(addr, config, None).await;
    assert!(locker.connect_error().is_some(), "it starts offline");

    // Calls from this runtime, one every 100 ms for at most 5 s.
    let mut granted = None;
    for _ in 0..50 {
        if let Ok(true) = locker.lock(&args("uid")).await {
            granted = Some(());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let why = locker.connect_error();
    drop(locker);
    idle.shut_down().await;
    server.abort();
    assert!(
        granted.is_some(),
        "calls from a driven runtime never got through to a server that is up, behind a \
         reconnect parked on an idle runtime (connect error: {why:?})"
    );
}
