//! A server closes a connection that stayed silent and held nothing
//! (`idle_timeout`, 5 min by default), and "its next call opens a
//! connection first" (docs/lock-servers.md). A program with one
//! current-thread runtime drives it only in `block_on`, one per call: the
//! connection's reader learns of the close only inside the next call's
//! `block_on`. That call may fail, as "a call sent at the very moment the
//! server closes", but the calls after it must get through to a server
//! that is up.
//!
//! Reproduces a past break: the reader sees the close with that call waiting,
//! so the close counts as a broken connection and the reconnect is left
//! to a background task on the caller's runtime; each later call is
//! ready at its first poll, `block_on` returns it without running that
//! task, and every call fails "not connected" for ever.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::NetLocker;
use tokio::sync::oneshot;

use crate::calls_in_a_block_on::{a_stand_in_on_a_runtime_of_its_own, calls_until_one_is_granted};
use crate::stand_in::{self, args};
use crate::wire;

#[test]
fn calls_each_in_a_block_on_get_through_after_the_server_closed_an_idle_connection() {
    let (server_runtime, listener, addr) = a_stand_in_on_a_runtime_of_its_own();
    let (closed_tx, closed_rx) = oneshot::channel::<()>();
    let server = server_runtime.spawn(async move {
        // The first connection: welcomed, one request granted, then
        // closed as idle.
        let mut first = stand_in::accept_hello(&listener).await.expect("hello");
        assert!(stand_in::welcome(&mut first).await);
        let request = wire::read_frame(&mut first, 1 << 20)
            .await
            .expect("request");
        assert!(stand_in::grant(&mut first, &request).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
        stand_in::close_as_idle(first).await;
        let _ = closed_tx.send(());
        stand_in::welcome_and_grant_every_connection(listener).await;
    });

    // The caller's only runtime, driven by one `block_on` per call.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let locker = runtime
        .block_on(RemoteLocker::connect(addr, stand_in::config()))
        .expect("connect");
    let first = runtime.block_on(locker.lock(&args("uid-first")));
    assert_eq!(first.ok(), Some(true), "the first call is granted");
    server_runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(5), closed_rx).await })
        .expect("the idle close in time")
        .expect("the idle close");

    // One call every 100 ms for at most 5 s.
    let (_, last) = calls_until_one_is_granted(&runtime, &locker, 50, Duration::from_secs(3));
    drop(locker);
    drop(runtime);
    server.abort();
    drop(server_runtime);
    assert!(
        last.is_none(),
        "after the server closed an idle connection, calls from a current-thread runtime, each \
         driving it, never got through in 5 s to a server that is up; the last: {}",
        last.unwrap_or_default()
    );
}
