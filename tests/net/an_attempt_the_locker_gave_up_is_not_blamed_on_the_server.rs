//! Reproduces a past break: a reopen whose socket the locker shut down itself (another connection was installed) reported "the server closed the connection during the handshake".
//!
//! docs/lock-servers.md: an offline locker's `connect_error()` "says why
//! it is offline, in words", and after an idle close the next call opens
//! a connection again. Since the locker shuts down the
//! sockets of attempts still in their handshake when another connection
//! is installed, such an attempt, parked on a runtime nobody drives,
//! fails when that runtime runs again: it reads the end of the stream its
//! own locker made, and blames the server for closing it. Before (at
//! ccdad0a) the same parked attempt said that the server did not answer
//! the handshake in time, which was true. Here the server never closes
//! that connection: the client does.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::NetLocker;
use tokio::sync::oneshot;

use crate::stand_in::{self, args, IdleRuntime};
use crate::wire;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopen_shut_down_by_its_locker_does_not_say_the_server_closed_it() {
    let (listener, addr) = stand_in::bind().await;
    let (parked_hello_tx, parked_hello_rx) = oneshot::channel::<()>();
    let (go_tx, mut go_rx) = oneshot::channel::<()>();
    let (who_closed_tx, who_closed_rx) = oneshot::channel::<Result<Vec<u8>, String>>();
    let server = tokio::spawn(async move {
        let first = stand_in::accept_hello(&listener).await.expect("hello");
        stand_in::welcome_then_close_as_idle(first).await;
        // The reopen that will be parked: its hello is read, never
        // answered, and its socket is never closed by the server.
        let mut parked = stand_in::accept_hello(&listener).await.expect("hello");
        let _ = parked_hello_tx.send(());
        // The driven runtime's connection: granted until told to close it
        // as idle.
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
        stand_in::close_as_idle(other).await;
        // Whether the client closed the parked attempt's socket (it was
        // shut down when the other connection was installed).
        let closed = wire::closed_within(&mut parked, Duration::from_secs(3)).await;
        let _ = who_closed_tx.send(closed);
        // The parked socket and the listener stay open until the test ends.
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop((parked, listener));
    });

    let locker = stand_in::connected_until_the_idle_close(addr).await;
    // A reopen parked mid-handshake on a runtime nobody drives.
    let mut idle = IdleRuntime::give_up_a_call(locker.clone(), "uid-parked", parked_hello_rx);

    // This runtime's call waits out the parked reopen, then gets a
    // connection of its own; installing it shuts down the parked socket.
    let call = tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid-b"))).await;
    assert_eq!(
        call.ok().and_then(Result::ok),
        Some(true),
        "the call on a driven runtime"
    );

    // The server closes that connection as idle; the locker stays online.
    let _ = go_tx.send(());
    assert!(
        stand_in::until_connected(&locker, false).await,
        "the idle close"
    );
    let who_closed = tokio::time::timeout(Duration::from_secs(4), who_closed_rx)
        .await
        .expect("the server reports on the parked socket")
        .expect("report");
    assert!(
        who_closed.is_ok(),
        "set-up: the client closed the parked attempt's socket ({who_closed:?})"
    );

    // The parked reopen runs again and ends: given up by its own locker,
    // it is no word on the server, which closed the other connection for
    // idleness, so the next call opens one.
    idle.drive_for(Duration::from_millis(100)).await;
    let online = locker.is_online();
    let why = locker.connect_error().map(|e| e.to_string());
    idle.shut_down().await;
    server.abort();
    if let Some(why) = &why {
        assert!(
            !why.contains("the server closed the connection"),
            "the locker blames the server for closing a connection that the locker shut down \
             itself (the server never closed it): {why}"
        );
    }
    assert!(
        online,
        "an attempt the locker gave up itself took the locker offline after an idle close \
         (connect error: {why:?})"
    );
}
