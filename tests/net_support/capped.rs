//! A lock server on loopback with the caps a scene sets, for scenes of a
//! hostile client that fills them (locks, releases, forces), and of an
//! admin who forces its locks open.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LocalLocker, LockArgs, NetLocker};
use tokio::sync::oneshot;

/// The admin token of every such server (the client token is
/// `crate::node::TOKEN`).
pub const ADMIN: &str = "admin-secret";

/// How long any one call of a scene may take.
pub const LIMIT: Duration = Duration::from_secs(5);

/// `call`, which must end within [`LIMIT`].
pub async fn bounded<T>(what: &str, call: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, call)
        .await
        .unwrap_or_else(|_| panic!("{what} did not end within {LIMIT:?}"))
}

/// Serves `locker` with `config` on a free loopback port: its address,
/// and the sender whose drop stops it.
pub async fn serve(
    locker: Arc<LocalLocker>,
    config: ServerConfig,
) -> (String, oneshot::Sender<()>) {
    let server = LockServer::new(locker, config).expect("valid config");
    let (stop, stopped) = oneshot::channel::<()>();
    let (bound, serve) = server
        .bind("127.0.0.1:0".parse().expect("an address"), async {
            let _ = stopped.await;
        })
        .await
        .expect("bind loopback");
    tokio::spawn(serve);
    (bound.to_string(), stop)
}

/// A connection to the server at `addr` with `token`.
pub async fn connect(addr: &str, token: &str) -> RemoteLocker {
    bounded(
        "connect",
        RemoteLocker::connect(addr.to_owned(), RemoteConfig::new(token)),
    )
    .await
    .expect("connect")
}

/// Locks `hog/{round}/{i}/{name}` for each of `names`, under fresh uids
/// (`args` makes each call), until the server refuses one; the locks it
/// granted (none when the cap is reached already).
pub async fn fill(
    culprit: &RemoteLocker,
    round: &str,
    names: &[&str],
    args: impl Fn(&str, &[String]) -> LockArgs,
) -> Vec<LockArgs> {
    let mut held = Vec::new();
    for i in 0..2000 {
        let lock_names: Vec<String> = names
            .iter()
            .map(|n| format!("hog/{round}/{i}/{n}"))
            .collect();
        let lock = args(&format!("hog-{round}-{i}"), &lock_names);
        match bounded("lock", culprit.lock(&lock)).await {
            Ok(true) => held.push(lock),
            _ => break,
        }
    }
    assert!(held.len() < 2000, "the table fills: {} locks", held.len());
    held
}
