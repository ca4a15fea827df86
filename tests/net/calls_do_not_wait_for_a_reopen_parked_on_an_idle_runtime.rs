//! A `RemoteLocker` may be used from several runtimes, and its docs
//! promise that a connection attempt stuck on a current-thread runtime
//! that nobody drives does not hold up callers on other runtimes: "until
//! then calls from other runtimes fail at once". The attempt may be the
//! reopen after the server closed an idle connection, made by a call
//! that runs on such a runtime. A call from another runtime must then
//! still answer (fail, or open its own connection), not wait for a
//! runtime that may never run again.
//!
//! The server here is a stand-in speaking the handshake by hand: it
//! welcomes the first connection and closes it cleanly (as for
//! idleness), and never answers the handshakes after it.
//!
//! Reproduces a past break: the call waited on the reopen with no limit (still waiting after 3 s).
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::{LockArgs, NetLocker};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::wire;

const TOKEN: &str = "client-secret";

fn args(uid: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec!["name".to_string()].into(),
        owner: "owner".into(),
        source: "source".into(),
        quorum: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_from_another_runtime_answers_while_a_reopen_is_parked() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let (second_hello_tx, second_hello_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        // The first connection: welcomed, then closed in good order with
        // nothing pending, as a server closes an idle connection.
        let (mut first, _) = listener.accept().await.expect("accept");
        wire::read_frame(&mut first, 4096).await.expect("hello");
        first
            .write_all(&wire::frame(&wire::accepted(
                wire::VERSION_6,
                Duration::from_secs(10),
            )))
            .await
            .expect("welcome");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = first.shutdown().await;
        drop(first);
        // Every later connection: its hello is read and never answered.
        let mut second_hello = Some(second_hello_tx);
        let mut held = Vec::new();
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let _ = wire::read_frame(&mut stream, 4096).await;
            if let Some(tx) = second_hello.take() {
                let _ = tx.send(());
            }
            held.push(stream);
        }
    });

    let mut config = RemoteConfig::new(TOKEN);
    config.connect_timeout = Duration::from_millis(500);
    config.call_timeout = Duration::from_millis(500);
    let locker = std::sync::Arc::new(
        RemoteLocker::connect(addr.clone(), config)
            .await
            .expect("connect"),
    );
    // Wait until the client saw the clean close: online (the next call
    // reconnects) but without a connection.
    let noticed = tokio::time::timeout(Duration::from_secs(5), async {
        while locker.protocol_version().is_some() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(noticed.is_ok(), "the client never noticed the close");
    assert!(
        locker.is_online(),
        "an idle close should leave the locker online"
    );

    // A call on a current-thread runtime reopens the connection, and that
    // runtime stops being driven while the handshake is under way.
    let (parked_tx, parked_rx) = std::sync::mpsc::channel::<()>();
    let (finish_tx, finish_rx) = std::sync::mpsc::channel::<()>();
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
            let _ = tokio::time::timeout(Duration::from_secs(5), second_hello_rx).await;
        });
        parked_tx.send(()).expect("test waits");
        // Not driven again, not dropped until the test is done.
        let _ = finish_rx.recv_timeout(Duration::from_secs(30));
        drop(runtime);
    });
    parked_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the idle runtime's call began its reopen");

    // A call from this runtime must answer, one way or the other, well
    // within a few connect timeouts.
    let answered =
        tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid-other"))).await;

    let _ = finish_tx.send(());
    let _ = idle_thread.join();
    server.abort();
    assert!(
        answered.is_ok(),
        "a call from another runtime still waited after 3 s (connect timeout 500 ms) for \
         a reopen parked on a runtime that is not driven; the docs say such calls fail at once"
    );
}
