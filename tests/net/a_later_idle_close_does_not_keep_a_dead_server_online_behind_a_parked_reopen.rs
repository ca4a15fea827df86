//! `is_online()` says true without a connection only after the server
//! closed an idle one, since the next call connects again; once that call
//! finds the server gone, the locker is offline. Here a reopen is parked
//! on a current-thread runtime nobody drives, another runtime's calls get
//! a connection of their own, and the server later closes that one as
//! idle too and goes away: the next call must leave the locker offline,
//! saying why, rather than online behind the parked reopen for ever.
//!
//! Reproduces a past break: the parked reopen held the reopen for ever,
//! so the second idle close left the locker online with its server gone.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::NetLocker;
use tokio::sync::oneshot;

use crate::stand_in::{self, args, IdleRuntime};
use crate::wire;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_idle_close_then_a_gone_server_leaves_the_locker_offline() {
    let (listener, addr) = stand_in::bind().await;
    let (parked_hello_tx, parked_hello_rx) = oneshot::channel::<()>();
    let (go_tx, mut go_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let first = stand_in::accept_hello(&listener).await.expect("hello");
        stand_in::welcome_then_close_as_idle(first).await;
        // The reopen that will be parked: never answered.
        let parked = stand_in::accept_hello(&listener).await.expect("hello");
        let _ = parked_hello_tx.send(());
        // The other runtime's connection: granted until told to close it
        // as idle and stop listening.
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
        stand_in::close_as_idle(other).await;
        drop(parked);
    });

    let locker = stand_in::connected_until_the_idle_close(addr).await;
    let idle = IdleRuntime::park_a_call(locker.clone(), "uid-parked", parked_hello_rx);

    // This runtime's calls get through on a connection of their own.
    let _ = tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid-b"))).await;
    assert!(
        stand_in::until_connected(&locker, true).await,
        "calls from a driven runtime never got a connection"
    );
    assert_eq!(locker.lock(&args("uid-c")).await.ok(), Some(true));

    // The server closes that connection as idle and goes away.
    let _ = go_tx.send(());
    let _ = server.await;
    assert!(
        stand_in::until_connected(&locker, false).await,
        "the second idle close"
    );
    let call = tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid-d"))).await;
    assert!(
        matches!(call, Ok(Err(_))),
        "a call with the server gone fails within a few connect timeouts: {call:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let online = locker.is_online();
    let why = locker.connect_error();
    drop(idle);
    assert!(
        !online,
        "the locker says it is online with its server gone, after a call found it so \
         (connect error: {why:?})"
    );
    assert!(
        why.is_some(),
        "an offline locker says why it cannot connect"
    );
}
