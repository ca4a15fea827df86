//! Reproduces a past break: a call whose request the writer took but had only partly written when the connection's runtime went idle failed as a server timeout (`LockerTimeout`) and left the connection, and the server's slot, in place.
//!
//! The `RemoteLocker` rustdoc, "Runtimes": if the connection lives on a
//! current-thread runtime that is idle but not dropped, "a call waits out
//! `call_timeout`, fails with `Error::LockerUnavailable` saying so, the
//! socket is shut down (the server frees its slot), and the locker
//! reconnects from the caller's runtime". Here the runtime is driven while
//! the writer takes two large requests and writes what the socket holds,
//! then goes idle; the server then reads every byte that reached it. The
//! rest of the second request sits in the idle writer's buffer: nothing
//! the server did, or could do, keeps its answer away.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::{Error, LockArgs, NetLocker};
use tokio::io::AsyncReadExt;
use tokio::net::TcpSocket;
use tokio::sync::oneshot;

use crate::stand_in;

/// A lock request of nearly the largest frame (2 MiB): 1900 names of
/// 1000 bytes. The client sends it as it is.
fn large(uid: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: (0..1900)
            .map(|i| format!("{uid}/{i:04}/{}", "x".repeat(990)))
            .collect::<Vec<_>>()
            .into(),
        owner: "owner".into(),
        source: "source".into(),
        quorum: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_request_is_half_written_on_an_idle_runtime_says_so() {
    // A small receive buffer, so that the requests do not all fit in the
    // kernel's buffers while the server does not read.
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("receive buffer");
    socket.bind("127.0.0.1:0".parse().unwrap()).expect("bind");
    let listener = socket.listen(16).expect("listen");
    let addr = listener.local_addr().expect("address").to_string();

    let (drain_tx, drain_rx) = oneshot::channel::<()>();
    let (drained_tx, drained_rx) = oneshot::channel::<usize>();
    let (closed_tx, closed_rx) = oneshot::channel::<bool>();
    let server = tokio::spawn(async move {
        let mut first = stand_in::accept_hello(&listener).await.expect("hello");
        assert!(stand_in::welcome(&mut first).await, "welcome");
        // Reads nothing until told, then every byte that reached it (until
        // none came for 500 ms); answers nothing.
        let _ = tokio::time::timeout(Duration::from_secs(10), drain_rx).await;
        let mut buf = vec![0u8; 1 << 16];
        let mut read = 0usize;
        let mut ended = false;
        loop {
            match tokio::time::timeout(Duration::from_millis(500), first.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => {
                    ended = true;
                    break;
                }
                Ok(Ok(n)) => read += n,
                Err(_) => break,
            }
        }
        let _ = drained_tx.send(read);
        // Whether the client shuts this socket down within 5 s.
        let shut =
            ended || stand_in::shut_by_the_client_within(&mut first, Duration::from_secs(5)).await;
        let _ = closed_tx.send(shut);
        stand_in::welcome_and_grant_every_connection(listener).await;
    });

    // The locker is made on a current-thread runtime of a thread of its
    // own, driven until told, then idle (not dropped) until released.
    let (locker, mut driven) = stand_in::connect_on_a_runtime_driven_until_told(
        addr,
        stand_in::config(),
        Duration::from_secs(10),
    )
    .await;

    // Two large requests, one after the other; the writer takes each and
    // writes what the socket holds while its runtime is driven.
    let first_call = tokio::spawn({
        let locker = locker.clone();
        async move { locker.lock(&large("first")).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second_call = tokio::spawn({
        let locker = locker.clone();
        async move { locker.lock(&large("second")).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The connection's runtime stops being driven; then the server reads
    // all that reached it.
    driven.go_idle().await;
    let _ = drain_tx.send(());
    let drained = tokio::time::timeout(Duration::from_secs(10), drained_rx)
        .await
        .ok()
        .and_then(Result::ok);

    let first = tokio::time::timeout(Duration::from_secs(5), first_call)
        .await
        .expect("the first call ended within its call timeout and some")
        .expect("call task");
    let second = tokio::time::timeout(Duration::from_secs(5), second_call)
        .await
        .expect("the second call ended within its call timeout and some")
        .expect("call task");
    let shut = tokio::time::timeout(Duration::from_secs(8), closed_rx)
        .await
        .ok()
        .and_then(Result::ok);
    let online = locker.is_online();

    driven.shut_down().await;
    server.abort();

    let request = 2 * 1900 * 1000;
    let read = drained.expect("the server drained the socket");
    assert!(
        read < request,
        "the test needs the requests not to fit the socket's buffers: the server read {read} \
         bytes of about {request}"
    );
    match &second {
        Err(Error::LockerUnavailable { .. }) => {}
        other => panic!(
            "the call whose request was only partly written when the connection's runtime went \
             idle (the server read all {read} bytes that reached it, of about {request}) should \
             fail with LockerUnavailable saying the runtime is not running the connection's \
             tasks (RemoteLocker rustdoc, \"Runtimes\"); got {other:?} (the first call: \
             {first:?}; online: {online})"
        ),
    }
    assert_eq!(
        shut,
        Some(true),
        "the socket of the connection on the idle runtime should be shut down"
    );
}
