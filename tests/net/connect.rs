//! `connect_all`: lockers for a whole cluster in one call, in the order
//! given, tolerant of servers that are down, strict about what only a
//! change of settings can fix.
#![cfg(feature = "net")]

use std::sync::Arc;

use quorum_lock::net::{connect_all, LockServer, RemoteConfig, ServerConfig};
use quorum_lock::{Dsync, Error, LocalLocker};
use tokio::sync::oneshot;

use crate::loopback;

const TOKEN: &str = "client-secret";

/// A lock server on an ephemeral loopback port; stops when dropped.
struct Node {
    addr: String,
    locker: Arc<LocalLocker>,
    _stop: oneshot::Sender<()>,
}

async fn start() -> Node {
    let locker = Arc::new(LocalLocker::new());
    let server = LockServer::new(locker.clone(), ServerConfig::new(TOKEN)).expect("valid config");
    let (bound, stop) = loopback::serve(server).await;
    Node {
        addr: bound.to_string(),
        locker,
        _stop: stop,
    }
}

/// A loopback address nothing listens on, for as long as the returned
/// socket lives: bound without listening, so that no server another test
/// starts meanwhile can take the port (one bound and released at once
/// can be, and a test then met that server instead of a refusal).
fn nobody() -> (tokio::net::TcpSocket, String) {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("address"))
        .expect("bind");
    let addr = socket.local_addr().expect("address").to_string();
    (socket, addr)
}

#[tokio::test]
async fn every_server_becomes_a_locker_in_the_order_given() {
    let nodes = [start().await, start().await, start().await];
    let addrs: Vec<&str> = nodes.iter().map(|n| n.addr.as_str()).collect();
    let lockers = connect_all(&addrs, RemoteConfig::new(TOKEN))
        .await
        .expect("connect");
    let endpoints: Vec<String> = lockers.iter().map(|l| l.endpoint()).collect();
    assert_eq!(endpoints, addrs);
    assert!(lockers.iter().all(|l| l.is_online() && !l.is_local()));
    let ds = Dsync::builder(lockers)
        .owner("connect-test")
        .build()
        .expect("dsync");
    let guard = ds.rw_mutex(["x"]).unwrap().lock().await.unwrap();
    assert!(nodes.iter().all(|n| n.locker.snapshot().len() == 1));
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn servers_that_are_down_are_offline_lockers_not_errors() {
    let up = [start().await, start().await];
    let (_held, down) = nobody();
    let addrs = [up[0].addr.clone(), down.clone(), up[1].addr.clone()];
    let lockers = connect_all(&addrs, RemoteConfig::new(TOKEN))
        .await
        .expect("a minority down is no error");
    let online: Vec<bool> = lockers.iter().map(|l| l.is_online()).collect();
    assert_eq!(online, [true, false, true]);
    let ds = Dsync::new(lockers).expect("dsync");
    let guard = ds.rw_mutex(["x"]).unwrap().lock().await.expect("2 of 3");
    guard.unlock().await.unwrap();

    // Nobody up at all (a service started before its lock servers): the
    // lockers wait offline, and locking says there is no quorum.
    let held = [nobody(), nobody(), nobody()];
    let addrs: Vec<&str> = held.iter().map(|(_, addr)| addr.as_str()).collect();
    let lockers = connect_all(&addrs, RemoteConfig::new(TOKEN))
        .await
        .expect("no error before anyone is up");
    assert!(lockers.iter().all(|l| !l.is_online()));
    let ds = Dsync::new(lockers).expect("dsync");
    let err = ds
        .rw_mutex(["x"])
        .unwrap()
        .try_lock()
        .await
        .expect_err("no quorum");
    assert!(matches!(err, Error::QuorumUnavailable { .. }), "{err}");
}

#[tokio::test]
async fn lists_that_cannot_work_are_refused() {
    let node = start().await;
    let cases: [(&[&str], &str); 4] = [
        (&[], "no lock servers"),
        (&[&node.addr, &node.addr], "listed twice"),
        (&["localhost"], "expected host:port"),
        (&["localhost:0"], "expected host:port"),
    ];
    for (nodes, says) in cases {
        let err = connect_all(nodes, RemoteConfig::new(TOKEN))
            .await
            .err()
            .expect("refused");
        assert!(matches!(err, Error::InvalidArgument(_)), "{nodes:?}: {err}");
        assert!(err.to_string().contains(says), "{nodes:?}: {err}");
    }
}

#[tokio::test]
async fn a_rejected_token_is_an_error_even_from_one_server() {
    let good = [start().await, start().await];
    let other = {
        let locker = Arc::new(LocalLocker::new());
        let server = LockServer::new(locker, ServerConfig::new("another-token")).unwrap();
        let (addr, _) = loopback::serve_while_the_runtime_runs(server).await;
        addr.to_string()
    };
    let addrs = [good[0].addr.clone(), good[1].addr.clone(), other];
    let err = connect_all(&addrs, RemoteConfig::new(TOKEN))
        .await
        .err()
        .expect("rejected");
    assert!(matches!(err, Error::Unauthorized { .. }), "{err}");
}
