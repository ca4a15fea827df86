//! docs/lock-servers.md: a `RemoteLocker` whose connection the server
//! closed for idleness "does not reconnect at once: its next call opens a
//! connection first (taking up to `connect_timeout`), and `is_online()`
//! stays true meanwhile". While that call's reopen is under way against a
//! server that is up (only slow to answer the handshake), the locker must
//! still say it is online.
//!
//! The server here is a stand-in speaking the protocol by hand: it
//! welcomes the first connection and closes it cleanly (as for idleness),
//! answers the second handshake only when told, and grants what it is
//! asked.
//!
//! Reproduces a past break: the locker said it was offline while its reopen ran.
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
async fn a_locker_is_online_while_its_next_call_reopens_the_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let (hello_tx, hello_rx) = oneshot::channel::<()>();
    let (answer_tx, answer_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let (mut first, _) = listener.accept().await.expect("accept");
        wire::read_frame(&mut first, 4096).await.expect("hello");
        assert!(welcome(&mut first).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = first.shutdown().await;
        drop(first);
        let (mut second, _) = listener.accept().await.expect("accept");
        let _ = wire::read_frame(&mut second, 4096).await;
        let _ = hello_tx.send(());
        let _ = answer_rx.await;
        assert!(welcome(&mut second).await);
        while let Ok(request) = wire::read_frame(&mut second, 1 << 20).await {
            let (id, _) = wire::response(&request);
            let mut reply = wire::varint(id);
            reply.extend([wire::REPLY_BOOL, 1]);
            if second.write_all(&wire::frame(&reply)).await.is_err() {
                return;
            }
        }
    });

    let mut config = RemoteConfig::new(TOKEN);
    config.connect_timeout = Duration::from_secs(3);
    let locker = Arc::new(RemoteLocker::connect(addr, config).await.expect("connect"));
    let noticed = tokio::time::timeout(Duration::from_secs(5), async {
        while locker.protocol_version().is_some() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(noticed.is_ok(), "the client never noticed the idle close");
    assert!(locker.is_online(), "online after the idle close");

    let calling = locker.clone();
    let call = tokio::spawn(async move { calling.lock(&args("uid")).await });
    tokio::time::timeout(Duration::from_secs(5), hello_rx)
        .await
        .expect("the call began its reopen")
        .expect("server alive");
    let online_during_reopen = locker.is_online();
    let _ = answer_tx.send(());
    let answered = tokio::time::timeout(Duration::from_secs(5), call).await;
    server.abort();
    assert!(
        matches!(answered, Ok(Ok(Ok(true)))),
        "the call after the reopen: {answered:?}"
    );
    assert!(
        online_during_reopen,
        "the locker said it was offline while its next call reopened the connection to a \
         server that is up"
    );
}
