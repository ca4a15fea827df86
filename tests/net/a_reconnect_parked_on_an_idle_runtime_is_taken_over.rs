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

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
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
    let (locker_tx, locker_rx) = std::sync::mpsc::channel::<Arc<RemoteLocker>>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let idle_thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let locker = runtime
            .block_on(RemoteLocker::connect(addr, config))
            .expect("an unanswered handshake leaves the locker offline, not an error");
        let _ = locker_tx.send(Arc::new(locker));
        let _ = done_rx.recv_timeout(Duration::from_secs(30));
        drop(runtime);
    });
    let locker =
        tokio::task::spawn_blocking(move || locker_rx.recv_timeout(Duration::from_secs(10)))
            .await
            .expect("thread")
            .expect("the locker was made");
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
    let _ = done_tx.send(());
    let _ = tokio::task::spawn_blocking(move || idle_thread.join()).await;
    server.abort();
    assert!(
        granted.is_some(),
        "calls from a driven runtime never got through to a server that is up, behind a \
         reconnect parked on an idle runtime (connect error: {why:?})"
    );
}
