//! After the server closed an idle connection, "the reopen runs as a task
//! of its own ...; if it fails, the locker is offline (`is_online()`
//! false, `connect_error()` says why)" (docs/lock-servers.md), and a
//! reopen parked on an idle runtime counts only for `connect_timeout` and
//! 250 ms from its start (the `RemoteLocker` rustdoc, "Runtimes").
//!
//! The scene: a reopen (A) is parked on a current-thread runtime nobody
//! drives; past its patience a call from a second current-thread runtime
//! starts a reopen (B) of its own, and that runtime is either dropped
//! (its caller gave up) or left idle. The server then goes away, and A's
//! runtime is driven again: A finds the server gone. The locker must then
//! be offline, saying why.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::NetLocker;
use tokio::sync::oneshot;

use crate::stand_in::{self, args, IdleRuntime};

/// What becomes of the second runtime, whose reopen B is under way.
#[derive(Debug, Clone, Copy)]
enum Second {
    /// Dropped before B ends: B frees the reopen slot.
    Dropped,
    /// Left idle: B holds the slot, parked past its patience.
    Parked,
}

async fn scene(second: Second) {
    let (listener, addr) = stand_in::bind().await;
    let (parked_tx, parked_rx) = oneshot::channel::<()>();
    let (second_tx, second_rx) = oneshot::channel::<()>();
    let (gone_tx, gone_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let first = stand_in::accept_hello(&listener).await.expect("hello");
        stand_in::welcome_then_close_as_idle(first).await;
        // Reopen A, to be parked: never answered.
        let parked = stand_in::accept_hello(&listener)
            .await
            .expect("parked hello");
        let _ = parked_tx.send(());
        // Reopen B: never answered either.
        let second = stand_in::accept_hello(&listener)
            .await
            .expect("second hello");
        let _ = second_tx.send(());
        let _ = tokio::time::timeout(Duration::from_secs(20), gone_rx).await;
        // Gone: both connections closed, nobody listening any more.
        drop(second);
        drop(parked);
        drop(listener);
    });

    let locker = stand_in::connected_until_the_idle_close(addr).await;
    assert!(locker.is_online(), "online after an idle close");
    let mut first = IdleRuntime::park_a_call(locker.clone(), "uid-parked", parked_rx);

    // Past A's patience (500 ms + 250 ms), a call from a second runtime
    // starts reopen B.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let parked_second = match second {
        Second::Dropped => {
            let second_locker = locker.clone();
            tokio::task::spawn_blocking(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(async {
                    let call = tokio::spawn(async move {
                        let _ = second_locker.lock(&args("uid-second")).await;
                    });
                    let _ = tokio::time::timeout(Duration::from_secs(5), second_rx).await;
                    call.abort();
                });
                drop(runtime);
            })
            .await
            .expect("second runtime");
            None
        }
        Second::Parked => Some(IdleRuntime::park_a_call(
            locker.clone(),
            "uid-second",
            second_rx,
        )),
    };

    // The server goes away for good.
    let _ = gone_tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(5), server).await;

    // A's runtime runs again until its call ends: reopen A finds the
    // server gone (its connection closed in the handshake).
    first.drive_until_the_call_ends().await;
    match second {
        Second::Dropped => {
            first.drive_for(Duration::from_millis(200)).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Well past B's patience too.
        Second::Parked => tokio::time::sleep(Duration::from_millis(1000)).await,
    }

    let online = locker.is_online();
    let why = locker.connect_error();
    first.shut_down().await;
    if let Some(parked) = parked_second {
        parked.shut_down().await;
    }
    assert!(
        !online,
        "reopen A failed with the server gone, and reopen B was {second:?}, yet the locker \
         says it is online (connect error: {why:?})"
    );
    assert!(
        why.is_some(),
        "an offline locker says why it cannot connect"
    );
}

/// Reproduces a past break: A, no longer the current reopen once the
/// dropped B freed the slot, neither cleared the idle-close flag nor
/// started the background reconnect when it failed, and the locker stayed
/// "online" with no connect error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_reopen_that_fails_after_a_dropped_one_leaves_the_locker_offline() {
    scene(Second::Dropped).await;
}

/// Reproduces a past break: B, parked past its patience, still held the
/// reopen slot as the one that decides (`superseded`), so A's failure
/// changed nothing and the locker stayed "online".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_reopen_that_fails_behind_another_parked_one_leaves_the_locker_offline() {
    scene(Second::Parked).await;
}
