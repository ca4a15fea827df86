//! Dropping a `RemoteLocker` closes its connection (`Shared`'s `Drop`:
//! "without this a dropped locker would keep its socket open until the
//! server closed it"). A reopen after an idle close runs as a task of its
//! own and holds the locker's shared state while it connects; parked on a
//! current-thread runtime nobody drives (its caller gave up), it must not
//! keep the live connection another runtime opened open after the locker
//! is dropped, holding a slot on the server for as long as that runtime
//! lives.
//!
//! Reproduces a past break: the parked reopen's task holds an `Arc<Shared>`, so
//! the dropped locker's connection stays open until the idle runtime is
//! driven again or dropped.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::NetLocker;
use tokio::sync::oneshot;

use crate::stand_in::{self, args, IdleRuntime};
use crate::wire;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_connection_closes_when_the_locker_is_dropped() {
    let (listener, addr) = stand_in::bind().await;
    let (parked_hello_tx, parked_hello_rx) = oneshot::channel::<()>();
    let (granted_tx, granted_rx) = oneshot::channel::<tokio::net::TcpStream>();
    let server = tokio::spawn(async move {
        let first = stand_in::accept_hello(&listener).await.expect("hello");
        stand_in::welcome_then_close_as_idle(first).await;
        // The reopen that will be parked: its hello is read, not answered.
        let parked = stand_in::accept_hello(&listener).await.expect("hello");
        let _ = parked_hello_tx.send(());
        // The driven runtime's own reopen: welcomed, one request granted,
        // then handed to the test to watch for its close.
        let mut live = stand_in::accept_hello(&listener).await.expect("hello");
        assert!(stand_in::welcome(&mut live).await);
        let request = wire::read_frame(&mut live, 1 << 20).await.expect("request");
        assert!(stand_in::grant(&mut live, &request).await);
        let _ = granted_tx.send(live);
        // Held until the test ends.
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(parked);
    });

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
    let mut live = tokio::time::timeout(Duration::from_secs(1), granted_rx)
        .await
        .expect("granted in time")
        .expect("the server's end of the live connection");

    // The last handle on the locker goes.
    assert_eq!(
        Arc::strong_count(&locker),
        1,
        "the test holds the only locker"
    );
    drop(locker);
    let closed = wire::closed_within(&mut live, Duration::from_secs(1)).await;

    idle.shut_down().await;
    // What held it: once the idle runtime is dropped, it closes.
    let after = match &closed {
        Ok(_) => Ok(Vec::new()),
        Err(_) => wire::closed_within(&mut live, Duration::from_secs(1)).await,
    };
    server.abort();
    assert!(
        closed.is_ok(),
        "the dropped locker's connection is {} while a reopen is parked on an idle runtime \
         (closed once that runtime was dropped: {})",
        closed.err().unwrap_or_default(),
        after.is_ok()
    );
}
