//! Reproduces a past break: a call waiting on a connection whose runtime shut down failed saying "reconnecting in the background", though nothing reconnects until the next call.
//!
//! The `RemoteLocker` rustdoc ("Runtimes"): when the runtime of the
//! connection shuts down, "the connection is gone but the locker still
//! counts as online ..., and the next call connects again from its own
//! runtime, as after an idle close". docs/lock-servers.md says what a
//! failing call's reason says comes next: "reconnecting in the
//! background", or "a later call connects again" when calls, not a
//! background task, open the connection again. A call whose reply was
//! still awaited when that runtime shut down must not promise a background
//! reconnect that never comes.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::{Error, NetLocker};
use tokio::sync::{mpsc, oneshot};

use crate::stand_in::{self, args};
use crate::wire;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_off_by_its_connections_runtime_shutting_down_says_what_follows() {
    let (listener, addr) = stand_in::bind().await;
    let (asked_tx, asked_rx) = oneshot::channel::<()>();
    let (later_tx, mut later_rx) = mpsc::unbounded_channel::<()>();
    let server = tokio::spawn(async move {
        // The first connection: welcomed, its request read and never
        // answered; it stays open.
        let mut first = stand_in::accept_hello(&listener).await.expect("hello");
        assert!(stand_in::welcome(&mut first).await, "welcome");
        let _request = wire::read_frame(&mut first, 1 << 20).await;
        let _ = asked_tx.send(());
        // Every later connection is reported, welcomed and granted.
        loop {
            let Some(mut stream) = stand_in::accept_hello(&listener).await else {
                break;
            };
            let _ = later_tx.send(());
            if stand_in::welcome(&mut stream).await {
                tokio::spawn(stand_in::grant_all(stream));
            }
        }
        drop(first);
    });

    // The locker connects from a runtime of its own: its connection's
    // reader and writer run there.
    let (locker, runtime) = stand_in::connect_from_a_runtime_of_its_own(addr).await;
    assert!(locker.protocol_version().is_some(), "set-up: connected");

    // A call from this runtime, in flight (the server has its request)
    // when that runtime shuts down.
    let call = tokio::spawn({
        let locker = locker.clone();
        async move { locker.lock(&args("uid-cut-off")).await }
    });
    tokio::time::timeout(Duration::from_secs(3), asked_rx)
        .await
        .expect("set-up: the server got the request in time")
        .expect("set-up: the server got the request");
    tokio::task::spawn_blocking(move || drop(runtime))
        .await
        .expect("the runtime shut down");
    let failed = tokio::time::timeout(Duration::from_secs(3), call)
        .await
        .expect("the call ends once its connection's runtime is gone")
        .expect("the call's task");
    let reason = match failed {
        Err(Error::LockerUnavailable { reason, .. }) => reason,
        other => panic!("set-up: the call fails as unavailable, got {other:?}"),
    };

    // What follows: no background attempt (50 ms backoff) within 1.5 s,
    // the locker online, and the next call connecting.
    let background = tokio::time::timeout(Duration::from_millis(1500), later_rx.recv())
        .await
        .is_ok();
    let online = locker.is_online();
    let next = tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid-next"))).await;
    server.abort();
    assert!(
        online,
        "set-up: the locker stays online after its runtime shut down"
    );
    assert!(
        matches!(next, Ok(Ok(true))),
        "set-up: the next call connects again ({next:?})"
    );
    assert!(
        background || !reason.contains("in the background"),
        "the call says {reason:?}, but no connection was attempted in the background in 1.5 s \
         (the reconnect backoff starts at 50 ms): the locker waits for the next call"
    );
}
