//! The trivial servers and client of the benchmark harness's ceiling
//! (`quorum_lock::net::ceiling`, feature `testing`) speak our protocol:
//! `RemoteLocker` and `Dsync` work against the trivial server, handshake
//! included, and the trivial client works against our `LockServer`.
#![cfg(all(feature = "net", feature = "testing"))]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::ceiling::{self, TrivialClient};
use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{Dsync, Error, LocalLocker, LockArgs, NetLocker, Waiting};
use tokio::net::TcpListener;

use crate::loopback;

const TOKEN: &str = "ceiling-secret";

async fn trivial_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    tokio::spawn(ceiling::serve(listener, TOKEN.to_owned()));
    addr
}

fn args(uid: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec!["r".to_owned()].into(),
        owner: "test".into(),
        source: "tests/net/ceiling.rs".into(),
        quorum: 2,
    }
}

#[tokio::test]
async fn our_client_talks_to_the_trivial_server() {
    let mut lockers: Vec<Arc<dyn NetLocker>> = Vec::new();
    for _ in 0..3 {
        let addr = trivial_server().await;
        let locker = RemoteLocker::connect(addr, RemoteConfig::new(TOKEN))
            .await
            .expect("handshake with the trivial server");
        assert!(locker.is_online());
        assert_eq!(
            locker.protocol_version(),
            Some(quorum_lock::net::PROTOCOL_VERSION)
        );
        assert!(locker.lock(&args("u1")).await.expect("lock"));
        assert!(locker.unlock(&args("u1")).await.expect("unlock"));
        lockers.push(Arc::new(locker));
    }
    for waiting in [Waiting::Push, Waiting::Poll] {
        let ds = Dsync::builder(lockers.clone())
            .waiting(waiting)
            .build()
            .expect("cluster");
        for _ in 0..100 {
            let guard = ds
                .rw_mutex(["a"])
                .expect("mutex")
                .lock()
                .await
                .expect("lock");
            guard.unlock().await.expect("unlock");
            let guard = ds
                .rw_mutex(["a"])
                .expect("mutex")
                .read()
                .await
                .expect("read");
            guard.unlock().await.expect("runlock");
        }
    }
}

#[tokio::test]
async fn the_trivial_server_refuses_a_wrong_token() {
    let addr = trivial_server().await;
    let err = RemoteLocker::connect(addr.clone(), RemoteConfig::new("wrong"))
        .await
        .err()
        .expect("a wrong token is refused");
    assert!(matches!(err, Error::Unauthorized { .. }), "{err}");
    assert!(TrivialClient::connect(&[addr], "wrong", 1).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trivial_client_cycles_on_trivial_and_real_servers() {
    let mut addrs = vec![trivial_server().await, trivial_server().await];
    // One real server: the trivial client's frames are ours too.
    let server =
        LockServer::new(Arc::new(LocalLocker::new()), ServerConfig::new(TOKEN)).expect("config");
    let (addr, _) = loopback::serve_while_the_runtime_runs(server).await;
    addrs.push(addr.to_string());
    let client = Arc::new(
        TrivialClient::connect(&addrs, TOKEN, 8)
            .await
            .expect("connect"),
    );
    let tasks: Vec<_> = (0..8)
        .map(|c| {
            let client = client.clone();
            tokio::spawn(async move {
                for i in 0..200 {
                    client
                        .cycle(c, &args(&format!("u-{c}-{i}")), Duration::from_secs(5))
                        .await
                        .expect("cycle");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("client task");
    }
    let sent = client
        .frames
        .sent
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(sent, 8 * 200 * 2 * 3);
    // Every reply to a quorum came back; a few late ones may still be on
    // their way.
    let received = client
        .frames
        .received
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(received >= 8 * 200 * 2 * 2, "{received}");
}
