//! `is_online()` is "whether the locker is believed reachable right now";
//! a `RemoteLocker` says true without a connection only after the server
//! closed an idle one, since the next call connects again. Once the
//! server is gone, the locker must say it is offline, and why.
//!
//! The scene: after an idle close, a reopen is parked on a current-thread
//! runtime nobody drives, and a call from this runtime opens a connection
//! of its own, which the server grants on. Then either the parked runtime
//! is dropped (its reopen with it) and the server resets that connection
//! and goes away, or the server closes it as idle too and goes away with
//! the parked reopen still there.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::NetLocker;
use tokio::sync::oneshot;

use crate::stand_in::{self, args, IdleRuntime};
use crate::wire;

/// How the server goes away.
#[derive(Debug, Clone, Copy)]
enum Gone {
    /// After the parked runtime was dropped: the connection reset.
    ResetAfterTheParkedReopenWasDropped,
    /// With the reopen still parked: the connection closed as idle.
    ClosedAsIdleBehindTheParkedReopen,
}

async fn scene(gone: Gone) {
    let (listener, addr) = stand_in::bind().await;
    let (parked_hello_tx, parked_hello_rx) = oneshot::channel::<()>();
    let (go_tx, mut go_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let first = stand_in::accept_hello(&listener).await.expect("hello");
        stand_in::welcome_then_close_as_idle(first).await;
        // The reopen that will be parked: never answered.
        let parked = stand_in::accept_hello(&listener).await.expect("hello");
        let _ = parked_hello_tx.send(());
        // The other runtime's connection: granted until told to go.
        let mut other = stand_in::accept_hello(&listener).await.expect("hello");
        assert!(stand_in::welcome(&mut other).await);
        loop {
            tokio::select! {
                _ = &mut go_rx => break,
                request = wire::read_frame(&mut other, 1 << 20) => {
                    let Ok(request) = request else { break };
                    if !stand_in::grant(&mut other, &request).await {
                        break;
                    }
                }
            }
        }
        drop(listener);
        match gone {
            Gone::ResetAfterTheParkedReopenWasDropped => stand_in::reset(other),
            Gone::ClosedAsIdleBehindTheParkedReopen => stand_in::close_as_idle(other).await,
        }
        drop(parked);
    });

    let locker = stand_in::connected_until_the_idle_close(addr).await;
    let idle = IdleRuntime::park_a_call(locker.clone(), "uid-parked", parked_hello_rx);

    // A call from this runtime gets a connection of its own.
    let _ = tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid-b"))).await;
    assert!(
        stand_in::until_connected(&locker, true).await,
        "calls from a driven runtime never got a connection"
    );
    assert_eq!(
        locker.lock(&args("uid-c")).await.ok(),
        Some(true),
        "a call on that connection"
    );

    let idle = match gone {
        Gone::ResetAfterTheParkedReopenWasDropped => {
            idle.shut_down().await;
            None
        }
        Gone::ClosedAsIdleBehindTheParkedReopen => Some(idle),
    };
    // The server goes away for good.
    let _ = go_tx.send(());
    let _ = server.await;
    assert!(
        stand_in::until_connected(&locker, false).await,
        "the connection ends ({gone:?})"
    );
    match gone {
        // Several background attempts, every one refused.
        Gone::ResetAfterTheParkedReopenWasDropped => {
            tokio::time::sleep(Duration::from_secs(1)).await
        }
        Gone::ClosedAsIdleBehindTheParkedReopen => {
            let call =
                tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid-d"))).await;
            assert!(
                matches!(call, Ok(Err(_))),
                "a call with the server gone fails within a few connect timeouts: {call:?}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let online = locker.is_online();
    let why = locker.connect_error();
    drop(idle);
    assert!(
        !online,
        "the locker says it is online with its server gone ({gone:?}; connect error: {why:?})"
    );
    assert!(
        why.is_some(),
        "an offline locker says why it cannot connect"
    );
}

/// Reproduces a past break: the dropped reopen set the idle flag back, and
/// a dead server was reported online.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locker_whose_server_is_gone_is_offline_after_a_dropped_reopen() {
    scene(Gone::ResetAfterTheParkedReopenWasDropped).await;
}

/// Reproduces a past break: the parked reopen held the reopen for ever,
/// so the second idle close left the locker online with its server gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_idle_close_then_a_gone_server_leaves_the_locker_offline() {
    scene(Gone::ClosedAsIdleBehindTheParkedReopen).await;
}
