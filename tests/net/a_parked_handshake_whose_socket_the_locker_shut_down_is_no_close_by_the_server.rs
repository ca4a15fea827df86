//! Reproduces a past break: a parked attempt whose socket the locker shut down, with the server's welcome already received, came back as a connection whose end counted as the server closing it, and calls failed at once before a backoff's step.
//!
//! docs/lock-servers.md: a connection still in its handshake when another
//! connection is installed "has its socket shut down at once", and such
//! an attempt, given up by the locker itself, is no word on the server.
//! A connection closed in good order before it served a call is opened
//! again by the next call, "from the second in a row within 10 s, not
//! before the backoff's step, and a call before it fails at once": that
//! backoff is for a server that closes connections as it welcomes them.
//!
//! Here the server closes one unused connection for idleness, then
//! welcomes every connection and never closes another. A reopen parked
//! on a runtime nobody drives has the server's welcome in its socket's
//! buffer when a call on a driven runtime installs a connection of its
//! own and shuts that socket down; the buffered welcome is still read
//! once the runtime runs again, so the attempt returns a connection on a
//! socket the locker shut down, installs it (nothing else is live: the
//! runtime of the driven call's connection shut down), and its reader
//! meets the end of the stream the locker made. That end is judged a
//! close by the server before the connection served a call, the second
//! in a row, and the next call fails at once, waiting for a backoff step
//! the server never earned.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::{NetLocker, RetryPolicy};
use tokio::io::AsyncWriteExt;
use tokio::sync::oneshot;

use crate::stand_in::{self, args, IdleRuntime};
use crate::wire;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_handshake_whose_socket_the_locker_shut_down_is_no_close_by_the_server() {
    let (listener, addr) = stand_in::bind().await;
    let (parked_hello_tx, parked_hello_rx) = oneshot::channel::<()>();
    let (welcome_parked_tx, welcome_parked_rx) = oneshot::channel::<()>();
    let (parked_closed_tx, parked_closed_rx) = oneshot::channel::<Result<Vec<u8>, String>>();
    let server = tokio::spawn(async move {
        // The first connection: welcomed, closed for idleness unused.
        let first = stand_in::accept_hello(&listener).await.expect("hello");
        stand_in::welcome_then_close_as_idle(first).await;
        // The reopen that will be parked: its hello is read; once its
        // runtime is idle, it is welcomed, and never closed by the server.
        let mut parked = stand_in::accept_hello(&listener).await.expect("hello");
        let _ = parked_hello_tx.send(());
        let _ = tokio::time::timeout(Duration::from_secs(5), welcome_parked_rx).await;
        let welcome = wire::frame(&wire::accepted(wire::VERSION_6, Duration::from_secs(10)));
        parked
            .write_all(&welcome)
            .await
            .expect("welcome the parked attempt");
        // Whether the client shut that socket down (it must, when it
        // installs another connection).
        let reporter = tokio::spawn(async move {
            let closed = wire::closed_within(&mut parked, Duration::from_secs(5)).await;
            let _ = parked_closed_tx.send(closed);
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(parked);
        });
        // Every later connection: welcomed and granted all it asks.
        stand_in::welcome_and_grant_every_connection(listener).await;
        reporter.abort();
    });

    // A step of the backoff drawn up to 30 s: a call made within it fails.
    let mut config = stand_in::config();
    config.reconnect = RetryPolicy {
        initial: Duration::from_secs(30),
        max: Duration::from_secs(30),
    };
    let locker = Arc::new(RemoteLocker::connect(addr, config).await.expect("connect"));
    assert!(
        stand_in::until_connected(&locker, false).await,
        "set-up: the idle close"
    );

    // A reopen parked mid-handshake on a runtime nobody drives; then the
    // server's welcome reaches its socket.
    let mut idle = IdleRuntime::give_up_a_call(locker.clone(), "uid-parked", parked_hello_rx);
    let _ = welcome_parked_tx.send(());

    // A call on a runtime of its own waits out the parked reopen, opens a
    // connection of its own and gets through; installing it shuts down
    // the parked socket. Then that runtime shuts down.
    let driven = tokio::task::spawn_blocking({
        let locker = locker.clone();
        move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("runtime");
            let call = runtime.block_on(async {
                tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid-driven"))).await
            });
            drop(runtime);
            call
        }
    })
    .await
    .expect("the driven call's thread");
    assert!(
        matches!(driven, Ok(Ok(true))),
        "set-up: the call on a driven runtime ({driven:?})"
    );
    let parked_closed = tokio::time::timeout(Duration::from_secs(6), parked_closed_rx)
        .await
        .expect("set-up: the server reports on the parked socket")
        .expect("report");
    assert!(
        parked_closed.is_ok(),
        "set-up: the client shut the parked attempt's socket down ({parked_closed:?})"
    );
    assert!(
        locker.is_online(),
        "set-up: online once the driven call's runtime shut down"
    );

    // The parked reopen's runtime runs again for a moment.
    idle.drive_for(Duration::from_millis(200)).await;

    // The server is up and has closed nothing since its one idle close.
    let call = tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid-next"))).await;
    idle.shut_down().await;
    server.abort();
    assert!(
        matches!(call, Ok(Ok(true))),
        "a call to a server that is up and welcomes every connection failed: the end of a \
         socket the locker shut down itself was counted as the server closing a connection \
         before it served a call, and the locker waits out a backoff step ({call:?})"
    );
}
