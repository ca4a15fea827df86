//! After the server closed an idle connection, the next call reopens it
//! and calls made meanwhile wait for that reopen rather than fail
//! (docs/lock-servers.md: the next call "opens a connection first", and
//! `is_online()` stays true meanwhile). The call that reopens may be
//! dropped while it does (a caller's own timeout, a `select!`): a call
//! that was waiting for it must then open the connection itself, not
//! fail as "not connected" with the server reachable.
//!
//! The server here is a stand-in speaking the protocol by hand: it
//! welcomes the first connection and closes it cleanly (as for idleness),
//! is slow to answer the second handshake, and welcomes every later
//! connection at once and grants whatever it is asked.
//!
//! Reproduces a past break: the waiting call failed "not connected" with the server reachable.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::{LockArgs, NetLocker};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use crate::wire;

const TOKEN: &str = "client-secret";

fn args(uid: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec![format!("name/{uid}")].into(),
        owner: "owner".into(),
        source: "source".into(),
        quorum: 1,
    }
}

/// Sends a `Welcome` of version 6; whether it was written.
async fn welcome(stream: &mut TcpStream) -> bool {
    stream
        .write_all(&wire::frame(&wire::accepted(
            wire::VERSION_6,
            Duration::from_secs(10),
        )))
        .await
        .is_ok()
}

/// Answers every request on `stream` with `Bool(true)`.
async fn grant_all(mut stream: TcpStream) {
    while let Ok(request) = wire::read_frame(&mut stream, wire_limit()).await {
        let (id, _) = wire::response(&request);
        let mut reply = wire::varint(id);
        reply.extend([wire::REPLY_BOOL, 1]);
        if stream.write_all(&wire::frame(&reply)).await.is_err() {
            return;
        }
    }
}

fn wire_limit() -> usize {
    1 << 20
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_for_a_reopen_whose_caller_was_dropped_connects_itself() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let (slow_hello_tx, slow_hello_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let (mut first, _) = listener.accept().await.expect("accept");
        wire::read_frame(&mut first, 4096).await.expect("hello");
        assert!(welcome(&mut first).await, "welcome the first connection");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = first.shutdown().await;
        drop(first);
        // The reopen: its handshake is answered only after a second.
        let (mut slow, _) = listener.accept().await.expect("accept");
        let _ = wire::read_frame(&mut slow, 4096).await;
        let _ = slow_hello_tx.send(());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if welcome(&mut slow).await {
                grant_all(slow).await;
            }
        });
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                if wire::read_frame(&mut stream, 4096).await.is_ok() && welcome(&mut stream).await {
                    grant_all(stream).await;
                }
            });
        }
    });

    let locker = RemoteLocker::connect(addr, RemoteConfig::new(TOKEN))
        .await
        .expect("connect");
    let noticed = tokio::time::timeout(Duration::from_secs(5), async {
        while locker.protocol_version().is_some() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(noticed.is_ok(), "the client never noticed the close");
    assert!(locker.is_online(), "an idle close leaves the locker online");

    // The reopening call gives up after 300 ms, while the server is slow
    // with its handshake; the other call was made while it reopened.
    let first = args("a");
    let reopening = tokio::time::timeout(Duration::from_millis(300), locker.lock(&first));
    let waiting = async {
        let _ = slow_hello_rx.await;
        locker.lock(&args("b")).await
    };
    let (dropped, waited) = tokio::join!(reopening, waiting);
    server.abort();
    assert!(
        dropped.is_err(),
        "the first call was meant to time out: {dropped:?}"
    );
    assert_eq!(
        waited,
        Ok(true),
        "a call that waited for a reopen whose caller was dropped failed instead of \
         connecting (the server answers every new connection at once)"
    );
}
