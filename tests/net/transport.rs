//! The network transport in one process: servers on loopback, remote
//! lockers, credentials, limits and reconnection (TLS is in tls.rs).
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{Dsync, Error, LocalLocker, LockArgs, NetLocker};
use tokio::sync::oneshot;

use crate::loopback;

const TOKEN: &str = "client-secret";
const ADMIN: &str = "admin-secret";

/// A server on an ephemeral loopback port; stops when dropped.
struct Node {
    addr: String,
    locker: Arc<LocalLocker>,
    _stop: oneshot::Sender<()>,
}

async fn start_with(config: ServerConfig, addr: &str) -> Node {
    let locker = Arc::new(LocalLocker::new());
    let server = LockServer::new(locker.clone(), config).expect("valid config");
    let (bound, stop, _serving) = loopback::serve_at(server, addr.parse().expect("address")).await;
    Node {
        addr: bound.to_string(),
        locker,
        _stop: stop,
    }
}

async fn start() -> Node {
    start_with(ServerConfig::new(TOKEN).admin_token(ADMIN), "127.0.0.1:0").await
}

async fn remote(node: &Node, token: &str) -> Result<RemoteLocker, Error> {
    RemoteLocker::connect(node.addr.clone(), RemoteConfig::new(token)).await
}

fn args(uid: &str, resource: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec![resource.to_string()].into(),
        owner: "test".into(),
        source: "tests/net/transport.rs".into(),
        quorum: 1,
    }
}

#[tokio::test]
async fn a_quorum_of_remote_servers_grants_and_releases() {
    let nodes = [start().await, start().await, start().await];
    let mut lockers: Vec<Arc<dyn NetLocker>> = Vec::new();
    for node in &nodes {
        lockers.push(Arc::new(remote(node, TOKEN).await.expect("connect")));
    }
    assert!(lockers.iter().all(|l| l.is_online() && !l.is_local()));
    let ds = Dsync::new(lockers).expect("dsync");
    let guard = ds.rw_mutex(["a", "b"]).unwrap().lock().await.unwrap();
    assert!(nodes.iter().all(|n| n.locker.snapshot().len() == 2));
    assert!(matches!(
        ds.rw_mutex(["b"]).unwrap().try_read().await,
        Err(Error::WouldBlock)
    ));
    guard.unlock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(nodes.iter().all(|n| n.locker.snapshot().is_empty()));
}

#[tokio::test]
async fn a_wrong_token_is_rejected_with_a_clear_error() {
    let node = start().await;
    let err = remote(&node, "guess").await.err().expect("rejected");
    assert!(matches!(err, Error::Unauthorized { .. }), "{err}");
    assert!(err.to_string().contains("check the token"), "{err}");
}

#[tokio::test]
async fn listing_and_forcing_need_the_admin_token() {
    let node = start().await;
    let client = remote(&node, TOKEN).await.unwrap();
    let admin = remote(&node, ADMIN).await.unwrap();
    assert!(client.lock(&args("u1", "r")).await.unwrap());
    let refused = client.locks().await.expect_err("client cannot list");
    assert!(refused.to_string().contains("admin token"), "{refused}");
    let by_resource = args("", "r");
    assert!(client.force_unlock(&by_resource).await.is_err());
    // A client may force-unlock by uid: the uid is its capability.
    assert!(client.force_unlock(&args("u1", "r")).await.unwrap());
    assert!(client.lock(&args("u2", "r")).await.unwrap());
    let listed = admin.locks().await.unwrap();
    assert_eq!(
        (listed[0].uid.as_str(), listed[0].resource.as_str()),
        ("u2", "r")
    );
    assert!(admin.force_unlock(&by_resource).await.unwrap());
    assert!(node.locker.snapshot().is_empty());
}

#[tokio::test]
async fn a_lock_overtaken_by_its_own_release_is_refused() {
    let node = start().await;
    let client = remote(&node, TOKEN).await.unwrap();
    // The unlock arrives first (say the acquire was cancelled and its lock
    // request was still in flight); the late lock must not create an entry.
    assert!(!client.unlock(&args("late", "r")).await.unwrap());
    assert!(!client.lock(&args("late", "r")).await.unwrap());
    assert!(!client.refresh(&args("late", "r")).await.unwrap());
    assert!(node.locker.snapshot().is_empty());
    assert!(client.lock(&args("fresh", "r")).await.unwrap());
}

#[tokio::test]
async fn a_connection_cannot_hold_more_than_its_limit() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_entries_per_connection = 3;
    let node = start_with(config, "127.0.0.1:0").await;
    let client = remote(&node, TOKEN).await.unwrap();
    for i in 0..3 {
        assert!(client
            .lock(&args(&format!("u{i}"), &format!("r{i}")))
            .await
            .unwrap());
    }
    let err = client
        .lock(&args("u3", "r3"))
        .await
        .expect_err("over the limit");
    assert!(err.to_string().contains("already holds 3 locks"), "{err}");
    assert!(client.unlock(&args("u0", "r0")).await.unwrap());
    assert!(client.lock(&args("u3", "r3")).await.unwrap());
}

#[tokio::test]
async fn a_down_node_fails_fast_and_is_probed_until_it_is_back() {
    // Reserve a port, then close it so nothing listens there.
    let addr = {
        let probe = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        probe.local_addr().unwrap().to_string()
    };
    let up = [start().await, start().await];
    let down = RemoteLocker::connect(addr.clone(), RemoteConfig::new(TOKEN))
        .await
        .expect("starts offline");
    assert!(!down.is_online());
    let started = std::time::Instant::now();
    assert!(matches!(
        down.lock(&args("u", "r")).await,
        Err(Error::LockerUnavailable { .. })
    ));
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "a down node must fail fast"
    );
    let down = Arc::new(down);
    let mut lockers: Vec<Arc<dyn NetLocker>> = vec![down.clone()];
    for node in &up {
        lockers.push(Arc::new(remote(node, TOKEN).await.unwrap()));
    }
    let ds = Dsync::new(lockers).unwrap();
    let guard = ds
        .rw_mutex(["x"])
        .unwrap()
        .lock()
        .await
        .expect("2 of 3 are enough");
    guard.unlock().await.unwrap();
    let _back = start_with(ServerConfig::new(TOKEN), &addr).await;
    for _ in 0..100 {
        if down.is_online() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(down.is_online(), "the client never reconnected");
    assert!(down.lock(&args("u", "r")).await.unwrap());
}
