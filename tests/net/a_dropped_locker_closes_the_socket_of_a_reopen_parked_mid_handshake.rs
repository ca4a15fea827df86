//! Reproduces a past break: a reopen parked mid-handshake keeps its socket, welcomed by the server, open after its locker is dropped.
//!
//! The `RemoteLocker` rustdoc ("Runtimes"): "No task holds the locker
//! while it waits for a connection: a locker dropped meanwhile closes its
//! connection at once"; a connection on a runtime that is idle but not
//! dropped has its socket shut down so that "the server frees its slot".
//!
//! A reopen after an idle close runs as a task on its caller's runtime.
//! Parked there mid-handshake (a current-thread runtime nobody drives,
//! its caller gave up), its socket lives inside the parked future: no
//! `Connection` holds it yet, so nothing shuts it down. The server
//! welcomes it and holds an authenticated slot for it; the locker is then
//! dropped, and the socket stays open for as long as the idle runtime
//! lives.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::stand_in::{self, IdleRuntime};
use crate::wire;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_parked_reopens_socket_closes_when_the_locker_is_dropped() {
    let (listener, addr) = stand_in::bind().await;
    let (parked_hello_tx, parked_hello_rx) = oneshot::channel::<()>();
    let (parked_tx, parked_rx) = oneshot::channel::<tokio::net::TcpStream>();
    let server = tokio::spawn(async move {
        let first = stand_in::accept_hello(&listener).await.expect("hello");
        stand_in::welcome_then_close_as_idle(first).await;
        // The reopen that will be parked: its hello is read, and once its
        // caller has given up, it is welcomed (the welcome waits in the
        // parked client's socket).
        let parked = stand_in::accept_hello(&listener).await.expect("hello");
        let _ = parked_hello_tx.send(());
        let _ = parked_tx.send(parked);
        // Any later connection is served.
        stand_in::welcome_and_grant_every_connection(listener).await;
    });

    let locker = stand_in::connected_until_the_idle_close(addr).await;

    // A call on a current-thread runtime starts the reopen and gives up
    // once the reopen's hello reached the server; the runtime then stays
    // idle (not dropped) with the reopen parked mid-handshake.
    let idle = IdleRuntime::give_up_a_call(locker.clone(), "uid-parked", parked_hello_rx);
    let mut parked = tokio::time::timeout(Duration::from_secs(1), parked_rx)
        .await
        .expect("the parked reopen reached the server")
        .expect("its socket");
    assert!(stand_in::welcome(&mut parked).await, "welcomed");

    // The last handle on the locker goes.
    assert_eq!(
        Arc::strong_count(&locker),
        1,
        "the test holds the only locker"
    );
    drop(locker);
    let closed = wire::closed_within(&mut parked, Duration::from_secs(1)).await;

    idle.shut_down().await;
    // What held it: once the idle runtime is dropped, it closes.
    let after = match &closed {
        Ok(_) => Ok(Vec::new()),
        Err(_) => wire::closed_within(&mut parked, Duration::from_secs(1)).await,
    };
    server.abort();
    assert!(
        closed.is_ok(),
        "the socket of a reopen parked mid-handshake, welcomed by the server, is {} once its \
         locker was dropped (closed once the idle runtime was dropped: {})",
        closed.err().unwrap_or_default(),
        after.is_ok()
    );
}
