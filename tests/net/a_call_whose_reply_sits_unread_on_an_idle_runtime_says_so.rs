//! Reproduces a past break: a call whose request the writer took before the connection's runtime went idle, and whose reply then sat unread, failed as a server timeout and left the connection in place.
//!
//! The `RemoteLocker` rustdoc, "Runtimes": if the connection lives on a
//! current-thread runtime that is idle but not dropped, "a call waits out
//! `call_timeout`, fails with `Error::LockerUnavailable` saying so, the
//! socket is shut down (the server frees its slot), and the locker
//! reconnects from the caller's runtime". Here the runtime is driven while
//! the request is sent, then goes idle before the server answers: the
//! reply reaches the socket and no reader runs to take it.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::{Error, NetLocker};
use tokio::sync::oneshot;

use crate::stand_in::{self, args};
use crate::wire;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_reply_sits_unread_on_an_idle_runtime_says_so() {
    let (listener, addr) = stand_in::bind().await;
    let (asked_tx, asked_rx) = oneshot::channel::<()>();
    let (answer_tx, answer_rx) = oneshot::channel::<()>();
    let (closed_tx, closed_rx) = oneshot::channel::<bool>();
    let server = tokio::spawn(async move {
        let mut first = stand_in::accept_hello(&listener).await.expect("hello");
        assert!(stand_in::welcome(&mut first).await, "welcome");
        let request = wire::read_frame(&mut first, 1 << 20)
            .await
            .expect("the request");
        let _ = asked_tx.send(());
        let _ = tokio::time::timeout(Duration::from_secs(5), answer_rx).await;
        assert!(stand_in::grant(&mut first, &request).await, "the answer");
        // Whether the client shuts this socket down within 4 s.
        let shut = stand_in::shut_by_the_client_within(&mut first, Duration::from_secs(4)).await;
        let _ = closed_tx.send(shut);
        // Later connections: welcomed and granted.
        stand_in::welcome_and_grant_every_connection(listener).await;
    });

    // The locker is made on a current-thread runtime of a thread of its
    // own, driven until told, then idle (not dropped) until released.
    let (locker, mut driven) = stand_in::connect_on_a_runtime_driven_until_told(
        addr,
        stand_in::config(),
        Duration::from_secs(5),
    )
    .await;

    let call = tokio::spawn({
        let locker = locker.clone();
        async move { locker.lock(&args("unread")).await }
    });
    tokio::time::timeout(Duration::from_secs(5), asked_rx)
        .await
        .expect("the request reached the server in time")
        .expect("the server read the request");
    // The connection's runtime stops being driven; then the server answers.
    driven.go_idle().await;
    let _ = answer_tx.send(());

    let result = tokio::time::timeout(Duration::from_secs(4), call)
        .await
        .expect("the call ended within its call timeout and some")
        .expect("call task");
    let shut = tokio::time::timeout(Duration::from_secs(5), closed_rx)
        .await
        .ok()
        .and_then(Result::ok);

    driven.shut_down().await;
    server.abort();

    match &result {
        Err(Error::LockerUnavailable { .. }) => {}
        other => panic!(
            "the call on a connection whose runtime went idle before its reply was read \
             should fail with LockerUnavailable saying so (RemoteLocker rustdoc, \
             \"Runtimes\"); got {other:?}"
        ),
    }
    assert_eq!(
        shut,
        Some(true),
        "the socket of the connection on the idle runtime should be shut down"
    );
}
