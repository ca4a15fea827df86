//! A reopen parked on a current-thread runtime nobody drives may end,
//! when the runtime runs a little, long after calls from other runtimes
//! got a connection of their own. Its failure then says nothing about the
//! server, which is up: it must start nothing on the idle runtime. Were it
//! to start the background reconnect there, that parked task would hold
//! the reconnect, and when the live connection later broke nothing would
//! reconnect.
//!
//! Reproduces a past break: the late failure started a reconnect on the
//! idle runtime, and the locker never reconnected after a reset.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::NetLocker;
use tokio::sync::oneshot;

use crate::stand_in::{self, args, IdleRuntime};
use crate::wire;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_failed_reopen_leaves_the_reconnect_to_the_driven_runtime() {
    let (listener, addr) = stand_in::bind().await;
    let (parked_hello_tx, parked_hello_rx) = oneshot::channel::<()>();
    let (fail_parked_tx, fail_parked_rx) = oneshot::channel::<()>();
    let (reset_live_tx, mut reset_live_rx) = oneshot::channel::<()>();
    let (reconnected_tx, reconnected_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let first = stand_in::accept_hello(&listener).await.expect("hello");
        stand_in::welcome_then_close_as_idle(first).await;
        // The reopen that will be parked: reset when told.
        let parked = stand_in::accept_hello(&listener).await.expect("hello");
        let _ = parked_hello_tx.send(());
        tokio::spawn(async move {
            let _ = fail_parked_rx.await;
            stand_in::reset(parked);
        });
        // The other runtime's connection: granted until told to reset it.
        let mut live = stand_in::accept_hello(&listener).await.expect("hello");
        assert!(stand_in::welcome(&mut live).await);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut reset_live_rx => break,
                    request = wire::read_frame(&mut live, 1 << 20) => {
                        let Ok(request) = request else { return };
                        if !stand_in::grant(&mut live, &request).await {
                            return;
                        }
                    }
                }
            }
            stand_in::reset(live);
        });
        // The next connection, the reconnect after the reset, and any
        // later one: welcomed and granted.
        let Some(mut next) = stand_in::accept_hello(&listener).await else {
            return;
        };
        let _ = reconnected_tx.send(());
        if stand_in::welcome(&mut next).await {
            tokio::spawn(stand_in::grant_all(next));
        }
        stand_in::welcome_and_grant_every_connection(listener).await;
    });

    let locker = stand_in::connected_until_the_idle_close(addr).await;
    let mut idle = IdleRuntime::park_a_call(locker.clone(), "uid-parked", parked_hello_rx);

    let _ = tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid-b"))).await;
    assert!(
        stand_in::until_connected(&locker, true).await,
        "calls from a driven runtime never got a connection"
    );

    // The parked reopen fails, and its runtime runs just long enough for
    // its call to end.
    let _ = fail_parked_tx.send(());
    tokio::time::sleep(Duration::from_millis(100)).await;
    idle.drive_until_the_call_ends().await;
    assert_eq!(
        locker.lock(&args("uid-c")).await.ok(),
        Some(true),
        "the live connection still serves"
    );

    // The live connection breaks; the server is up.
    let _ = reset_live_tx.send(());
    let reconnected = tokio::time::timeout(Duration::from_secs(5), reconnected_rx)
        .await
        .is_ok()
        && stand_in::until_connected(&locker, true).await;
    let why = locker.connect_error();
    drop(idle);
    server.abort();
    assert!(
        reconnected,
        "the locker never reconnected to a server that is up after its connection was \
         reset (connect error: {why:?})"
    );
}
