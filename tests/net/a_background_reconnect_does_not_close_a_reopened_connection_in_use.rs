//! After the server closed an idle connection, a reopen may be parked on
//! a current-thread runtime nobody drives; a call from another runtime
//! then fails after the connect timeout and starts the background
//! reconnect (the `RemoteLocker` rustdoc, "Runtimes"). If the parked
//! runtime is dropped while that reconnect is still connecting, the next
//! call opens a connection of its own (a dropped reopen leaves that to
//! the next caller). When the background reconnect then connects, it must
//! not take away the connection a call is waiting on for its reply: the
//! server is up and answers it.
//!
//! The server here is a stand-in speaking the protocol by hand: it
//! welcomes the first connection and closes it cleanly (as for idleness);
//! holds the second handshake (the parked reopen) unanswered; holds the
//! third (the background reconnect) until the fourth (the next call's
//! reopen) carries a request; then welcomes the third, and answers that
//! request a little later.
//!
//! Reproduces a past break: the background reconnect installed its connection over the live one and the call failed.
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
async fn a_background_reconnect_leaves_the_reopened_connection_a_call_waits_on() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let (parked_hello_tx, parked_hello_rx) = oneshot::channel::<()>();
    let (background_hello_tx, background_hello_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let (mut first, _) = listener.accept().await.expect("accept");
        wire::read_frame(&mut first, 4096).await.expect("hello");
        assert!(welcome(&mut first).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = first.shutdown().await;
        drop(first);
        // The reopen that will be parked: never answered.
        let (mut parked, _) = listener.accept().await.expect("accept");
        let _ = wire::read_frame(&mut parked, 4096).await;
        let _ = parked_hello_tx.send(());
        // The background reconnect: held for now.
        let (mut background, _) = listener.accept().await.expect("accept");
        let _ = wire::read_frame(&mut background, 4096).await;
        let _ = background_hello_tx.send(());
        // The next call's reopen, and its request.
        let (mut reopened, _) = listener.accept().await.expect("accept");
        let _ = wire::read_frame(&mut reopened, 4096).await;
        assert!(welcome(&mut reopened).await);
        let request = wire::read_frame(&mut reopened, 1 << 20)
            .await
            .expect("the call's request");
        // Now the background reconnect gets its welcome; the call its
        // answer a little later.
        assert!(welcome(&mut background).await);
        let background = tokio::spawn(grant_all(background));
        tokio::time::sleep(Duration::from_millis(300)).await;
        if grant(&mut reopened, &request).await {
            grant_all(reopened).await;
        }
        drop(parked);
        let _ = background.await;
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

    // A call on a current-thread runtime begins the reopen; the runtime is
    // not driven again, then dropped when told.
    let (parked_tx, parked_rx) = std::sync::mpsc::channel::<()>();
    let (drop_tx, drop_rx) = std::sync::mpsc::channel::<()>();
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
        let _ = drop_rx.recv_timeout(Duration::from_secs(30));
        drop(runtime);
    });
    parked_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the idle runtime's call began its reopen");

    // A call from this runtime fails after the connect timeout and starts
    // the background reconnect, whose handshake the server holds.
    let _ = tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid-b"))).await;
    tokio::time::timeout(Duration::from_secs(5), background_hello_rx)
        .await
        .expect("the background reconnect began")
        .expect("server alive");

    // The parked runtime goes, and its reopen with it.
    drop_tx.send(()).expect("idle thread waits");
    let _ = tokio::task::spawn_blocking(move || idle_thread.join()).await;

    // The next call opens a connection and waits there for its answer.
    let answered = tokio::time::timeout(Duration::from_secs(5), locker.lock(&args("uid-c"))).await;
    server.abort();
    let answered = answered.expect("the call answered within its call timeout");
    assert!(
        matches!(answered, Ok(true)),
        "a call waiting for its reply on the connection it reopened failed when the background \
         reconnect connected: {answered:?}"
    );
}
