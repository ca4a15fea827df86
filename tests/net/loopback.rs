//! A lock server served on 127.0.0.1 for as long as the test wants it: the
//! bind, the shutdown signal and the serving task that many tests of
//! tests/net wrote out each time.
#![cfg(feature = "net")]

use std::net::SocketAddr;

use quorum_lock::net::LockServer;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Binds `server` to an ephemeral port of 127.0.0.1 and serves it on a
/// task of the current runtime until the returned sender is sent on or
/// dropped: the address it listens on, and that sender (hold it for as
/// long as the server must serve).
pub async fn serve(server: LockServer) -> (SocketAddr, oneshot::Sender<()>) {
    let (bound, stop, _serving) = serve_with_its_task(server).await;
    (bound, stop)
}

/// As [`serve`], and the serving task too: it ends once the server has
/// shut down, for the tests that wait for that.
pub async fn serve_with_its_task(
    server: LockServer,
) -> (SocketAddr, oneshot::Sender<()>, JoinHandle<()>) {
    serve_at(server, "127.0.0.1:0".parse().expect("address")).await
}

/// As [`serve_with_its_task`], bound to `addr` (a port a server used
/// before, for the tests of a restart).
pub async fn serve_at(
    server: LockServer,
    addr: SocketAddr,
) -> (SocketAddr, oneshot::Sender<()>, JoinHandle<()>) {
    let (stop, stopped) = oneshot::channel::<()>();
    let (bound, serving) = server
        .bind(addr, async {
            let _ = stopped.await;
        })
        .await
        .expect("bind loopback");
    (bound, stop, tokio::spawn(serving))
}

/// Binds `server` to an ephemeral port of 127.0.0.1 and serves it, with no
/// shutdown signal, for as long as the test's runtime runs: the address,
/// and the serving task (for the tests that check it is still serving).
pub async fn serve_while_the_runtime_runs(server: LockServer) -> (SocketAddr, JoinHandle<()>) {
    let (bound, serving) = server
        .bind(
            "127.0.0.1:0".parse().expect("address"),
            std::future::pending(),
        )
        .await
        .expect("bind loopback");
    (bound, tokio::spawn(serving))
}
