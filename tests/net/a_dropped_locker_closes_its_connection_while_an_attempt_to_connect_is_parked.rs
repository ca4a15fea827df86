//! Dropping a `RemoteLocker` closes its connection (`Shared`'s `Drop`:
//! "without this a dropped locker would keep its socket open until the
//! server closed it"). An attempt to connect (a background reconnect, or a
//! reopen after an idle close) runs as a task of its own; parked on a
//! current-thread runtime nobody drives, in the middle of a handshake the
//! server has not answered, it must not keep the live connection another
//! runtime opened open after the locker is dropped, holding a slot on the
//! server for as long as that runtime lives.
#![cfg(feature = "net")]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::{NetLocker, RetryPolicy};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use crate::stand_in::{self, args, IdleRuntime};
use crate::wire;

/// Which attempt is parked.
#[derive(Debug, Clone, Copy)]
enum Parked {
    /// `connect`'s background reconnect: its handshake and the first one
    /// were never answered.
    Reconnect,
    /// The reopen after an idle close, whose caller gave up.
    Reopen,
}

/// The stand-in: the parked attempt's hello read and never answered, then
/// the driven runtime's connection welcomed, one request granted, and its
/// server end handed over to watch for its close.
fn serve(
    listener: tokio::net::TcpListener,
    parked: Parked,
    parked_hello: oneshot::Sender<()>,
    granted: oneshot::Sender<TcpStream>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let before = match parked {
            // `connect`'s handshake: not answered.
            Parked::Reconnect => stand_in::accept_hello(&listener).await,
            Parked::Reopen => {
                let first = stand_in::accept_hello(&listener).await.expect("hello");
                stand_in::welcome_then_close_as_idle(first).await;
                None
            }
        };
        let attempt = stand_in::accept_hello(&listener).await.expect("hello");
        let _ = parked_hello.send(());
        let mut live = stand_in::accept_hello(&listener).await.expect("hello");
        assert!(stand_in::welcome(&mut live).await);
        let request = wire::read_frame(&mut live, 1 << 20).await.expect("request");
        assert!(stand_in::grant(&mut live, &request).await);
        let _ = granted.send(live);
        // Held until the test ends.
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop((before, attempt));
    })
}

/// Drops the test's only handle on `locker` and checks that the server's
/// end of its live connection sees it close; `shut_down` ends the idle
/// runtime afterwards, to say whether that is what held it.
async fn the_live_connection_closes_when_the_locker_is_dropped(
    parked: Parked,
    locker: Arc<RemoteLocker>,
    granted: oneshot::Receiver<TcpStream>,
    shut_down: impl Future<Output = ()>,
) {
    let mut live = tokio::time::timeout(Duration::from_secs(1), granted)
        .await
        .expect("granted in time")
        .expect("the server's end of the live connection");
    assert_eq!(
        Arc::strong_count(&locker),
        1,
        "the test holds the only locker"
    );
    drop(locker);
    let closed = wire::closed_within(&mut live, Duration::from_secs(1)).await;
    shut_down.await;
    let after = match &closed {
        Ok(_) => Ok(Vec::new()),
        Err(_) => wire::closed_within(&mut live, Duration::from_secs(1)).await,
    };
    assert!(
        closed.is_ok(),
        "the dropped locker's connection is {} while a {parked:?} is parked on an idle \
         runtime (closed once that runtime was dropped: {})",
        closed.err().unwrap_or_default(),
        after.is_ok()
    );
}

/// Reproduces a past break: the parked reconnect task upgraded its weak
/// reference to the locker's shared state for the whole attempt, so the
/// dropped locker's state, and its live connection, outlived it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_connection_closes_when_the_locker_is_dropped_while_a_reconnect_is_parked() {
    let (listener, addr) = stand_in::bind().await;
    let (parked_hello_tx, parked_hello_rx) = oneshot::channel::<()>();
    let (granted_tx, granted_rx) = oneshot::channel();
    let server = serve(listener, Parked::Reconnect, parked_hello_tx, granted_tx);
    let mut config = stand_in::config();
    config.reconnect = RetryPolicy {
        initial: Duration::from_millis(50),
        max: Duration::from_millis(200),
    };
    // Made on a current-thread runtime, driven until its reconnect's hello
    // reached the server, then left idle (not dropped).
    let (locker, idle) =
        stand_in::connect_on_an_idle_runtime(addr, config, Some(parked_hello_rx)).await;
    // Calls from this runtime, one every 100 ms for at most 5 s, until one
    // gets through past the parked reconnect.
    let mut granted = false;
    for _ in 0..50 {
        if let Ok(true) = locker.lock(&args("uid")).await {
            granted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(granted, "a call from a driven runtime got through");
    the_live_connection_closes_when_the_locker_is_dropped(
        Parked::Reconnect,
        locker,
        granted_rx,
        idle.shut_down(),
    )
    .await;
    server.abort();
}

/// Reproduces a past break: the parked reopen's task held an
/// `Arc<Shared>`, so the dropped locker's connection stayed open until the
/// idle runtime was driven again or dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_connection_closes_when_the_locker_is_dropped_while_a_reopen_is_parked() {
    let (listener, addr) = stand_in::bind().await;
    let (parked_hello_tx, parked_hello_rx) = oneshot::channel::<()>();
    let (granted_tx, granted_rx) = oneshot::channel();
    let server = serve(listener, Parked::Reopen, parked_hello_tx, granted_tx);
    let locker = stand_in::connected_until_the_idle_close(addr).await;
    // A call on a current-thread runtime starts the reopen and gives up
    // once the reopen's hello reached the server; the runtime then stays
    // idle (not dropped) with the reopen parked mid-handshake.
    let idle = IdleRuntime::give_up_a_call(locker.clone(), "uid-parked", parked_hello_rx);
    // This runtime's call gets a connection of its own past the parked
    // reopen.
    let call = tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid"))).await;
    assert_eq!(
        call.ok().and_then(Result::ok),
        Some(true),
        "a call from a driven runtime got through"
    );
    the_live_connection_closes_when_the_locker_is_dropped(
        Parked::Reopen,
        locker,
        granted_rx,
        idle.shut_down(),
    )
    .await;
    server.abort();
}
