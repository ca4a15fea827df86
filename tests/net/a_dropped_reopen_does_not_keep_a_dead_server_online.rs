//! `is_online()` is "whether the locker is believed reachable right now";
//! a `RemoteLocker` says true without a connection only after the server
//! closed an idle one, since the next call connects again. A reopen
//! after such a close may be parked on a current-thread runtime nobody
//! drives; a call from another runtime then opens a connection of its
//! own. When the parked runtime is then dropped (and its reopen with it),
//! and the server later goes away for good, the locker must say it is
//! offline, and why, not online with no connect error.
//!
//! Reproduces a past break: the dropped reopen set the idle flag back, and a dead server was reported online.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::NetLocker;
use tokio::sync::oneshot;

use crate::stand_in::{self, args, IdleRuntime};
use crate::wire;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locker_whose_server_is_gone_is_offline_after_a_dropped_reopen() {
    let (listener, addr) = stand_in::bind().await;
    let (parked_hello_tx, parked_hello_rx) = oneshot::channel::<()>();
    let (kill_tx, mut kill_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let first = stand_in::accept_hello(&listener).await.expect("hello");
        stand_in::welcome_then_close_as_idle(first).await;
        // The reopen that will be parked: never answered.
        let parked = stand_in::accept_hello(&listener).await.expect("hello");
        let _ = parked_hello_tx.send(());
        // The other runtime's connection: granted until told to go away.
        let mut other = stand_in::accept_hello(&listener).await.expect("hello");
        assert!(stand_in::welcome(&mut other).await);
        loop {
            tokio::select! {
                _ = &mut kill_rx => break,
                request = wire::read_frame(&mut other, 1 << 20) => {
                    let Ok(request) = request else { break };
                    if !stand_in::grant(&mut other, &request).await {
                        break;
                    }
                }
            }
        }
        // Gone: the connection reset, nobody listening any more.
        stand_in::reset(other);
        drop(parked);
        drop(listener);
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

    // The parked runtime goes, and its reopen with it.
    idle.shut_down().await;

    // The server goes away for good.
    let _ = kill_tx.send(());
    let _ = server.await;
    assert!(stand_in::until_connected(&locker, false).await, "the reset");
    // Several background attempts, every one refused.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !locker.is_online(),
        "the locker says it is online with its server gone and every reconnect refused \
         (connect error: {:?})",
        locker.connect_error()
    );
    assert!(
        locker.connect_error().is_some(),
        "an offline locker says why it cannot connect"
    );
}
