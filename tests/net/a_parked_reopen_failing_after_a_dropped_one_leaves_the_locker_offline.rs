//! After the server closed an idle connection, "the reopen runs as a task
//! of its own ...; if it fails, the locker is offline (`is_online()`
//! false, `connect_error()` says why)" (docs/lock-servers.md). Here a
//! reopen is parked on a current-thread runtime nobody drives; past its
//! patience a call from a second runtime starts a reopen of its own, and
//! that runtime is dropped before it ends (its caller gave up). The
//! server then goes away, and the parked runtime is driven again: its
//! reopen and its call find the server gone. The locker must then be
//! offline, saying why.
//!
//! The parked reopen is no longer the current one (the dropped one freed
//! the slot), so its failure neither clears the idle-close flag nor
//! starts the background reconnect: no reopen is current any more, and
//! the locker stays "online" with its server gone and no connect error,
//! until some later call tries again.
//!
//! Reproduces a past break: a late reopen failure with no reopen under way left the locker online.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::NetLocker;
use tokio::sync::oneshot;

use crate::stand_in::{self, args, IdleRuntime};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_reopen_that_fails_after_a_dropped_one_leaves_the_locker_offline() {
    let (listener, addr) = stand_in::bind().await;
    let (parked_tx, parked_rx) = oneshot::channel::<()>();
    let (second_tx, second_rx) = oneshot::channel::<()>();
    let (gone_tx, gone_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let first = stand_in::accept_hello(&listener).await.expect("hello");
        stand_in::welcome_then_close_as_idle(first).await;
        // The reopen that will be parked: never answered.
        let parked = stand_in::accept_hello(&listener)
            .await
            .expect("parked hello");
        let _ = parked_tx.send(());
        // The second runtime's reopen: never answered either.
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
    let mut idle = IdleRuntime::park_a_call(locker.clone(), "uid-parked", parked_rx);

    // Past the parked reopen's patience (500 ms + 250 ms), a call from a
    // second runtime starts a reopen of its own, gives up, and its
    // runtime goes.
    tokio::time::sleep(Duration::from_millis(1000)).await;
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

    // The server goes away for good.
    let _ = gone_tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(5), server).await;

    // The parked runtime runs again: its reopen finds the server gone.
    idle.drive_until_the_call_ends().await;
    idle.drive_for(Duration::from_millis(200)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    let online = locker.is_online();
    let why = locker.connect_error();
    idle.shut_down().await;
    assert!(
        !online,
        "a reopen failed with the server gone, yet the locker says it is online (connect \
         error: {why:?})"
    );
    assert!(
        why.is_some(),
        "an offline locker says why it cannot connect"
    );
}
