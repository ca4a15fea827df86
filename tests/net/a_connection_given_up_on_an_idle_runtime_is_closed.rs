//! A connection whose tasks live on a current-thread runtime nobody drives
//! is given up by the next call from another runtime: it "waits out
//! `call_timeout`, fails with `Error::LockerUnavailable` saying so, and
//! the locker reconnects from the caller's runtime" (`RemoteLocker`,
//! Runtimes). The connection given up must then be closed (`down` "stops
//! both tasks ... so that the socket closes"): else the server keeps its
//! slot, and all it charges to it, for as long as that runtime lives,
//! while the locker holds a second connection.
//!
//! Reproduces a past break: `down` only aborts the reader and writer, and an
//! aborted task on a runtime nobody drives is not dropped, so the socket
//! they own stays open until the runtime runs or is dropped.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::{Error, NetLocker};
use tokio::sync::oneshot;

use crate::stand_in::{self, args};
use crate::wire;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_left_on_an_idle_runtime_closes_when_given_up() {
    let (listener, addr) = stand_in::bind().await;
    let (first_tx, first_rx) = oneshot::channel::<tokio::net::TcpStream>();
    let server = tokio::spawn(async move {
        // The connection made on the idle runtime: welcomed, then handed
        // to the test to watch.
        let mut first = stand_in::accept_hello(&listener).await.expect("hello");
        assert!(stand_in::welcome(&mut first).await);
        let _ = first_tx.send(first);
        // The reconnect from the driven runtime, and any after it.
        stand_in::welcome_and_grant_every_connection(listener).await;
    });

    // Connected on a current-thread runtime that is then left idle, not
    // dropped.
    let mut config = stand_in::config();
    config.call_timeout = Duration::from_millis(500);
    let (locker, idle) = stand_in::connect_on_an_idle_runtime(addr, config, None).await;
    let mut first = tokio::time::timeout(Duration::from_secs(1), first_rx)
        .await
        .expect("accepted in time")
        .expect("the server's end of the first connection");

    // A call from this runtime gives that connection up.
    let call = tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid"))).await;
    assert!(
        matches!(call, Ok(Err(Error::LockerUnavailable { .. }))),
        "the call waits out the call timeout and fails: {call:?}"
    );
    // And the locker reconnects from here.
    let mut granted = false;
    for _ in 0..30 {
        if let Ok(true) = locker.lock(&args("uid-later")).await {
            granted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(granted, "the locker reconnected from the driven runtime");

    let closed = wire::closed_within(&mut first, Duration::from_secs(1)).await;
    drop(locker);
    idle.shut_down().await;
    let after = match &closed {
        Ok(_) => Ok(Vec::new()),
        Err(_) => wire::closed_within(&mut first, Duration::from_secs(1)).await,
    };
    server.abort();
    assert!(
        closed.is_ok(),
        "the connection given up on the idle runtime is {} on the server, beside the new one \
         (closed once that runtime was dropped: {})",
        closed.err().unwrap_or_default(),
        after.is_ok()
    );
}
