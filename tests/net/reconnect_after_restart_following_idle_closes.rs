//! A client whose connections an honest server closed for idleness comes
//! back quickly after an ordinary restart of that server: idle closes are
//! no sign of a server that breaks connections, so they must not push the
//! reconnect backoff towards its ceiling.
#![cfg(feature = "net")]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LocalLocker, NetLocker};
use tokio::sync::oneshot;

use crate::loopback;

const TOKEN: &str = "client-secret";
/// Shorter than the 10 s a connection must last to count as settled.
const IDLE: Duration = Duration::from_millis(200);
const LOCKERS: usize = 20;

/// Serves on `addr` until the sender is dropped; the future ends once the
/// server has shut down.
async fn serve(addr: SocketAddr) -> (SocketAddr, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = Some(IDLE);
    let server = LockServer::new(Arc::new(LocalLocker::new()), config).expect("valid config");
    loopback::serve_at(server, addr).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_whose_connections_were_closed_for_idleness_comes_back_soon_after_a_restart() {
    let (addr, stop, running) = serve("127.0.0.1:0".parse().unwrap()).await;
    let mut lockers = Vec::new();
    for _ in 0..LOCKERS {
        let locker = RemoteLocker::connect(addr.to_string(), RemoteConfig::new(TOKEN))
            .await
            .expect("connect");
        assert!(locker.is_online());
        lockers.push(locker);
    }
    // An application that calls now and then, less often than the idle
    // timeout: every connection is closed for idleness, and the next call
    // opens one again.
    for _ in 0..6 {
        tokio::time::sleep(IDLE * 3).await;
        for locker in &lockers {
            locker
                .status()
                .await
                .expect("the next call opens a connection");
        }
    }
    tokio::time::sleep(IDLE * 3).await;

    // An ordinary restart: the server stops, a call finds it down, and it
    // is back on the same port at once.
    drop(stop);
    running.await.expect("the server shuts down");
    for locker in &lockers {
        assert!(locker.status().await.is_err(), "the server is down");
    }
    let (_, _stop, _running) = serve(addr).await;
    let back = Instant::now();
    let limit = Duration::from_millis(600);
    while back.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let online = lockers.iter().filter(|l| l.is_online()).count();
    assert!(
        online >= LOCKERS - 2,
        "only {online} of {LOCKERS} clients were back {limit:?} after the server was back (their \
         reconnect backoff, 50 ms to 2 s, starts at its first step after a restart)"
    );
}
