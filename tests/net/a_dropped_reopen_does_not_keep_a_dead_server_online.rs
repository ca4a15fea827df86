//! `is_online()` is "whether the locker is believed reachable right now";
//! a `RemoteLocker` says true without a connection only after the server
//! closed an idle one, since the next call connects again. A reopen
//! after such a close may be parked on a current-thread runtime nobody
//! drives; calls from other runtimes then start the background reconnect,
//! which connects. When the parked runtime is then dropped (and its reopen
//! with it), and the server later goes away for good, the locker must say
//! it is offline, and why, not online with no connect error.
//!
//! The server here is a stand-in speaking the protocol by hand: it
//! welcomes the first connection and closes it cleanly (as for idleness);
//! holds the second handshake (the parked reopen) unanswered; welcomes
//! the third (the background reconnect) and grants what it is asked, until
//! told to reset it and stop listening.
//!
//! Reproduces a past break: the dropped reopen set the idle flag back, and a dead server was reported online.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locker_whose_server_is_gone_is_offline_after_a_dropped_reopen() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let (parked_hello_tx, parked_hello_rx) = oneshot::channel::<()>();
    let (kill_tx, mut kill_rx) = oneshot::channel::<()>();
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
        // The background reconnect: granted until told to go away.
        let (mut background, _) = listener.accept().await.expect("accept");
        let _ = wire::read_frame(&mut background, 4096).await;
        assert!(welcome(&mut background).await);
        loop {
            tokio::select! {
                _ = &mut kill_rx => break,
                request = wire::read_frame(&mut background, 1 << 20) => {
                    let Ok(request) = request else { break };
                    let (id, _) = wire::response(&request);
                    let mut reply = wire::varint(id);
                    reply.extend([wire::REPLY_BOOL, 1]);
                    if background.write_all(&wire::frame(&reply)).await.is_err() {
                        break;
                    }
                }
            }
        }
        // Gone: the connection reset, nobody listening any more.
        let _ = background.set_zero_linger();
        drop(background);
        drop(parked);
        drop(listener);
    });

    let mut config = RemoteConfig::new(TOKEN);
    config.connect_timeout = Duration::from_millis(500);
    config.call_timeout = Duration::from_secs(2);
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
    // the background reconnect, which connects.
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
    assert_eq!(
        locker.lock(&args("uid-c")).await.ok(),
        Some(true),
        "a call on the background connection"
    );

    // The parked runtime goes, and its reopen with it.
    drop_tx.send(()).expect("idle thread waits");
    let _ = tokio::task::spawn_blocking(move || idle_thread.join()).await;

    // The server goes away for good.
    let _ = kill_tx.send(());
    let _ = server.await;
    let down = tokio::time::timeout(Duration::from_secs(5), async {
        while locker.protocol_version().is_some() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(down.is_ok(), "the client never noticed the reset");
    // Several background attempts, every one refused.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !locker.is_online(),
        "the locker says it is online with its server gone and every reconnect refused \
         (connect error: {:?})",
        locker.connect_error()
    );
    assert!(
        locker.connect_error().is_some(),
        "an offline locker says why it cannot connect"
    );
}
