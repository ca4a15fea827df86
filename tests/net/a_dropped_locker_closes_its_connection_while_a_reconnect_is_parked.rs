//! Dropping a `RemoteLocker` closes its connection (`Shared`'s `Drop`). A
//! background reconnect parked on a current-thread runtime nobody drives,
//! in the middle of a handshake the server has not answered, is taken over
//! by a call from another runtime, which connects; once the locker is
//! dropped, that connection must close, not stay open on the server for
//! as long as the idle runtime lives.
//!
//! Reproduces a past break: the parked reconnect task upgraded its weak
//! reference to the locker's shared state for the whole attempt, so the
//! dropped locker's state, and its live connection, outlive it.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::{NetLocker, RetryPolicy};
use tokio::sync::oneshot;

use crate::stand_in::{self, args};
use crate::wire;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_connection_closes_when_the_locker_is_dropped() {
    let (listener, addr) = stand_in::bind().await;
    let (parked_hello_tx, parked_hello_rx) = oneshot::channel::<()>();
    let (granted_tx, granted_rx) = oneshot::channel::<tokio::net::TcpStream>();
    let server = tokio::spawn(async move {
        // `connect`'s handshake, then the reconnect's: neither answered.
        let unanswered = stand_in::accept_hello(&listener).await.expect("hello");
        let parked = stand_in::accept_hello(&listener).await.expect("hello");
        let _ = parked_hello_tx.send(());
        // The driven runtime's reconnect: welcomed, one request granted,
        // then handed to the test to watch for its close.
        let mut live = stand_in::accept_hello(&listener).await.expect("hello");
        assert!(stand_in::welcome(&mut live).await);
        let request = wire::read_frame(&mut live, 1 << 20).await.expect("request");
        assert!(stand_in::grant(&mut live, &request).await);
        let _ = granted_tx.send(live);
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop((unanswered, parked));
    });

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
    let mut live = tokio::time::timeout(Duration::from_secs(1), granted_rx)
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

    idle.shut_down().await;
    let after = match &closed {
        Ok(_) => Ok(Vec::new()),
        Err(_) => wire::closed_within(&mut live, Duration::from_secs(1)).await,
    };
    server.abort();
    assert!(
        closed.is_ok(),
        "the dropped locker's connection is {} while a reconnect is parked on an idle runtime \
         (closed once that runtime was dropped: {})",
        closed.err().unwrap_or_default(),
        after.is_ok()
    );
}
