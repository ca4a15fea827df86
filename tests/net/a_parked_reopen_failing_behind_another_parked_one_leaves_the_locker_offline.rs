//! After the server closed an idle connection, "the reopen runs as a task
//! of its own ...; if it fails, the locker is offline (`is_online()`
//! false, `connect_error()` says why)" (docs/lock-servers.md), and a
//! reopen parked on an idle runtime counts only for `connect_timeout` and
//! 250 ms from its start (the `RemoteLocker` rustdoc, "Runtimes").
//!
//! Here a reopen (A) is parked on a current-thread runtime nobody drives;
//! past its patience a call from a second current-thread runtime starts a
//! reopen (B) of its own, and that runtime is left idle too (not dropped).
//! The server then goes away, and the first runtime is driven again: A
//! finds the server gone, and its call waits out B's patience and fails.
//! The locker must then be offline, saying why.
//!
//! `reopen::reopen` lets a failure change nothing while the reopen slot
//! holds another id (`superseded`), whether or not that one is past its
//! patience; B, parked, holds the slot for as long as its runtime lives,
//! so A's failure neither clears `reopen_next` nor notes why: the locker
//! says it is online with its server gone, and no error, until some call
//! from a driven runtime tries again. (The fix of a dropped B, which
//! frees the slot, does not reach a parked one.)
//!
//! Reproduces a past break: a reopen parked past its time still counted as the one that decides.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::NetLocker;
use tokio::sync::oneshot;

use crate::stand_in::{self, IdleRuntime};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_reopen_that_fails_behind_another_parked_one_leaves_the_locker_offline() {
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
        // Reopen B, parked too: never answered either.
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
    // starts reopen B, which that runtime, left idle, parks.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let second = IdleRuntime::park_a_call(locker.clone(), "uid-second", second_rx);

    // The server goes away for good.
    let _ = gone_tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(5), server).await;

    // The first runtime runs again until its call ends: reopen A finds
    // the server gone (its connection closed in the handshake), and the
    // call, having waited out B's patience, fails.
    first.drive_until_the_call_ends().await;
    // Well past B's patience too.
    tokio::time::sleep(Duration::from_millis(1000)).await;

    let online = locker.is_online();
    let why = locker.connect_error();
    first.shut_down().await;
    second.shut_down().await;
    assert!(
        !online,
        "a reopen failed with the server gone, and the only other one is parked past its \
         patience, yet the locker says it is online (connect error: {why:?})"
    );
    assert!(
        why.is_some(),
        "an offline locker says why it cannot connect"
    );
}
