//! A `RemoteLocker` may be used from several runtimes, and its docs
//! promise that a reopen (after the server closed an idle connection)
//! parked on a current-thread runtime that nobody drives is waited for at
//! most the connect timeout and 250 ms. A call from another runtime must
//! then still answer (fail, or open its own connection), not wait for a
//! runtime that may never run again.
//!
//! Reproduces a past break: the call waited on the reopen with no limit (still waiting after 3 s).
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::NetLocker;
use tokio::sync::oneshot;

use crate::stand_in::{self, args, IdleRuntime};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_from_another_runtime_answers_while_a_reopen_is_parked() {
    let (listener, addr) = stand_in::bind().await;
    let (second_hello_tx, second_hello_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let first = stand_in::accept_hello(&listener).await.expect("hello");
        stand_in::welcome_then_close_as_idle(first).await;
        // Every later connection: its hello is read and never answered.
        let mut second_hello = Some(second_hello_tx);
        let mut held = Vec::new();
        while let Some(stream) = stand_in::accept_hello(&listener).await {
            if let Some(tx) = second_hello.take() {
                let _ = tx.send(());
            }
            held.push(stream);
        }
    });

    let locker = stand_in::connected_until_the_idle_close(addr).await;
    assert!(
        locker.is_online(),
        "an idle close should leave the locker online"
    );

    // A call on a current-thread runtime reopens the connection, and that
    // runtime stops being driven while the handshake is under way.
    let idle = IdleRuntime::park_a_call(locker.clone(), "uid-parked", second_hello_rx);

    // A call from this runtime must answer, one way or the other, well
    // within a few connect timeouts.
    let answered =
        tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid-other"))).await;

    drop(idle);
    server.abort();
    assert!(
        answered.is_ok(),
        "a call from another runtime still waited after 3 s (connect timeout 500 ms) for \
         a reopen parked on a runtime that is not driven"
    );
}
