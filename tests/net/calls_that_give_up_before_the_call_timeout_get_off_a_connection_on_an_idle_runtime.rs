//! The `RemoteLocker` rustdoc ("Runtimes"): if the connection lives on a
//! current-thread runtime that is idle but not dropped, "a call waits out
//! `RemoteConfig::call_timeout`, fails with `Error::LockerUnavailable`
//! saying so, the socket is shut down (the server frees its slot), and
//! the locker reconnects from the caller's runtime". Callers often give up
//! sooner than the call timeout (5 s by default): their own deadline, or
//! a `Dsync` whose quorum settled without this server, which drops the
//! call. Here the locker was made on a runtime that then sits idle, the
//! server is up and grants everything, and the calls, from a driven
//! runtime, each give up after 1 s (the call timeout is 2 s).
//!
//! The connection is given up only by a call that itself waited out the
//! call timeout with its frame still in the outbox (`Connection::call`);
//! a call dropped sooner forgets its slot and leaves its frame there, and
//! no later call looks at how long the outbox has gone untaken. So the
//! locker stays "online" on a connection that carries nothing, and every
//! such call fails, for ever, with the server up.
//!
//! Reproduces a past break: only a call that waited out the whole call timeout gave up a stalled connection.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::NetLocker;

use crate::stand_in::{self, args};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_that_give_up_before_the_call_timeout_get_off_a_connection_on_an_idle_runtime() {
    let (listener, addr) = stand_in::bind().await;
    let server = tokio::spawn(stand_in::welcome_and_grant_every_connection(listener));

    // Made on a current-thread runtime that is then kept, idle, until the
    // test ends.
    let (made_tx, made_rx) = std::sync::mpsc::channel();
    let (end_tx, end_rx) = std::sync::mpsc::channel::<()>();
    let idle = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let locker = runtime.block_on(RemoteLocker::connect(addr, stand_in::config()));
        let _ = made_tx.send(locker);
        let _ = end_rx.recv_timeout(Duration::from_secs(30));
        drop(runtime);
    });
    let locker = tokio::task::spawn_blocking(move || made_rx.recv_timeout(Duration::from_secs(10)))
        .await
        .expect("waiting thread")
        .expect("the locker was made")
        .expect("connect");
    assert!(locker.protocol_version().is_some(), "connected");

    // One call every 100 ms for at most 8 s, each given up after 1 s.
    let mut last = None;
    let mut calls = 0;
    let until = tokio::time::Instant::now() + Duration::from_secs(8);
    while tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
        calls += 1;
        let call = tokio::time::timeout(Duration::from_secs(1), locker.lock(&args("uid"))).await;
        match call {
            Ok(Ok(true)) => {
                last = None;
                break;
            }
            other => last = Some(format!("{other:?}")),
        }
    }
    let online = locker.is_online();
    drop(locker);
    let _ = end_tx.send(());
    let _ = tokio::task::spawn_blocking(move || idle.join()).await;
    server.abort();
    assert!(
        last.is_none(),
        "{calls} calls, each given up after 1 s (the call timeout is 2 s), never got through in \
         8 s to a server that is up, the connection's runtime being idle; the locker says it is \
         {}; the last call: {}",
        if online { "online" } else { "offline" },
        last.unwrap_or_default()
    );
}
