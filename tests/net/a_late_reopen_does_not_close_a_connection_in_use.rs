//! After the server closed an idle connection, a call on a current-thread
//! runtime that nobody drives may begin the reopen and park in it. Calls
//! from other runtimes then fail after the connect timeout and start the
//! background reconnect, whose connection serves them (the `RemoteLocker`
//! rustdoc, "Runtimes"). When the parked runtime is driven again, its
//! reopen must not take that connection away from a call waiting on it
//! for its reply: the server is up and answers it.
//!
//! The server here is a stand-in speaking the protocol by hand: it
//! welcomes the first connection and closes it cleanly (as for idleness);
//! holds the second handshake (the parked reopen) until told; welcomes
//! the third (the background reconnect) and answers its first request
//! only when told; welcomes and grants everything on any later one.
//!
//! Reproduces a past break: the late reopen closed the live connection a call waited on.
#![cfg(feature = "net")]

use std::sync::Arc;
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

async fn welcome(stream: &mut TcpStream) -> bool {
    stream
        .write_all(&wire::frame(&wire::accepted(
            wire::VERSION_6,
            Duration::from_secs(10),
        )))
        .await
        .is_ok()
}

async fn grant(stream: &mut TcpStream, request: &[u8]) -> bool {
    let (id, _) = wire::response(request);
    let mut reply = wire::varint(id);
    reply.extend([wire::REPLY_BOOL, 1]);
    stream.write_all(&wire::frame(&reply)).await.is_ok()
}

async fn grant_all(mut stream: TcpStream) {
    while let Ok(request) = wire::read_frame(&mut stream, 1 << 20).await {
        if !grant(&mut stream, &request).await {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopen_resumed_late_leaves_the_connection_a_call_waits_on() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let (parked_hello_tx, parked_hello_rx) = oneshot::channel::<()>();
    let (answer_parked_tx, answer_parked_rx) = oneshot::channel::<()>();
    let (slow_call_tx, slow_call_rx) = oneshot::channel::<()>();
    let (answer_slow_tx, answer_slow_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let (mut first, _) = listener.accept().await.expect("accept");
        wire::read_frame(&mut first, 4096).await.expect("hello");
        assert!(welcome(&mut first).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = first.shutdown().await;
        drop(first);
        // The reopen that will be parked: welcomed only when told.
        let (mut parked, _) = listener.accept().await.expect("accept");
        let _ = wire::read_frame(&mut parked, 4096).await;
        let _ = parked_hello_tx.send(());
        tokio::spawn(async move {
            let _ = answer_parked_rx.await;
            if welcome(&mut parked).await {
                grant_all(parked).await;
            }
        });
        // The background reconnect: its first request is answered only
        // when told.
        let (mut background, _) = listener.accept().await.expect("accept");
        let _ = wire::read_frame(&mut background, 4096).await;
        tokio::spawn(async move {
            if !welcome(&mut background).await {
                return;
            }
            let Ok(request) = wire::read_frame(&mut background, 1 << 20).await else {
                return;
            };
            let _ = slow_call_tx.send(());
            let _ = answer_slow_rx.await;
            if grant(&mut background, &request).await {
                grant_all(background).await;
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

    let mut config = RemoteConfig::new(TOKEN);
    config.connect_timeout = Duration::from_millis(500);
    config.call_timeout = Duration::from_secs(5);
    let locker = Arc::new(RemoteLocker::connect(addr, config).await.expect("connect"));
    let noticed = tokio::time::timeout(Duration::from_secs(5), async {
        while locker.protocol_version().is_some() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(noticed.is_ok(), "the client never noticed the idle close");

    // A call on a current-thread runtime begins the reopen, and the
    // runtime stops being driven meanwhile.
    let (parked_tx, parked_rx) = std::sync::mpsc::channel::<()>();
    let (drive_tx, drive_rx) = std::sync::mpsc::channel::<()>();
    let (driven_tx, driven_rx) = std::sync::mpsc::channel::<()>();
    let on_idle_runtime = locker.clone();
    let idle_thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let _parked = runtime.spawn(async move {
            let _ = on_idle_runtime.lock(&args("uid-parked")).await;
        });
        runtime.block_on(async {
            let _ = tokio::time::timeout(Duration::from_secs(5), parked_hello_rx).await;
        });
        let _ = parked_tx.send(());
        if drive_rx.recv_timeout(Duration::from_secs(30)).is_ok() {
            runtime.block_on(async { tokio::time::sleep(Duration::from_millis(500)).await });
        }
        let _ = driven_tx.send(());
        drop(runtime);
    });
    parked_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the idle runtime's call began its reopen");

    // A call from this runtime fails after the connect timeout and starts
    // the background reconnect, whose connection comes up.
    let _ = tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid-b"))).await;
    let reconnected = tokio::time::timeout(Duration::from_secs(5), async {
        while locker.protocol_version().is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        reconnected.is_ok(),
        "the background reconnect never connected"
    );

    // A call on that connection, whose reply the server holds back.
    let waiting = locker.clone();
    let call = tokio::spawn(async move { waiting.lock(&args("uid-waiting")).await });
    tokio::time::timeout(Duration::from_secs(5), slow_call_rx)
        .await
        .expect("the call reached the server")
        .expect("server alive");

    // The parked reopen gets its welcome and its runtime is driven again.
    let _ = answer_parked_tx.send(());
    tokio::time::sleep(Duration::from_millis(100)).await;
    drive_tx.send(()).expect("idle thread waits");
    let _ =
        tokio::task::spawn_blocking(move || driven_rx.recv_timeout(Duration::from_secs(10))).await;
    // Now the server answers the waiting call.
    let _ = answer_slow_tx.send(());
    let answered = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the call answered within its call timeout")
        .expect("task");
    let _ = idle_thread.join();
    server.abort();
    assert!(
        matches!(answered, Ok(true)),
        "a call waiting for its reply on a working connection failed when a reopen parked \
         on another runtime resumed: {answered:?}"
    );
}
