//! A lock server served on 127.0.0.1 for as long as the test wants it: the
//! bind, the shutdown signal and the serving task that many tests of
//! tests/net wrote out each time.
#![cfg(feature = "net")]

use std::net::SocketAddr;

use quorum_lock::net::LockServer;
use tokio::sync::oneshot;

/// Binds `server` to an ephemeral port of 127.0.0.1 and serves it on a
/// task of the current runtime until the returned sender is sent on or
/// dropped: the address it listens on, and that sender (hold it for as
/// long as the server must serve).
pub async fn serve(server: LockServer) -> (SocketAddr, oneshot::Sender<()>) {
    let (stop, stopped) = oneshot::channel::<()>();
    let (bound, serving) = server
        .bind("127.0.0.1:0".parse().expect("address"), async {
            let _ = stopped.await;
        })
        .await
        .expect("bind loopback");
    tokio::spawn(serving);
    (bound, stop)
}
