//! After the server closed a client's connection for idleness, the next
//! call opens a new one. Calls made together at that moment must all wait
//! for that connection rather than fail as "not connected": an
//! application's first locks after a quiet spell, or `status` asking for
//! the health and the listing together, are made at the same time.
//!
//! Reproduces a past break: all calls but the first failed as "not connected".
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LocalLocker, LockArgs, NetLocker};

const TOKEN: &str = "client-secret";
const IDLE: Duration = Duration::from_millis(200);
const CALLS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_made_together_after_an_idle_close_all_reach_the_server() {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = Some(IDLE);
    let server = LockServer::new(Arc::new(LocalLocker::new()), config).expect("valid config");
    let (addr, run) = server
        .bind("127.0.0.1:0".parse().unwrap(), std::future::pending::<()>())
        .await
        .expect("bind loopback");
    let running = tokio::spawn(run);
    let locker = RemoteLocker::connect(addr.to_string(), RemoteConfig::new(TOKEN))
        .await
        .expect("connect");

    let mut failed = Vec::new();
    for round in 0..3 {
        // A quiet spell: the server closes the connection.
        tokio::time::sleep(IDLE * 4).await;
        let calls = (0..CALLS).map(|i| {
            let locker = &locker;
            async move {
                let args = LockArgs {
                    uid: format!("uid-{round}-{i}").into(),
                    resources: vec![format!("name/{round}/{i}")].into(),
                    owner: "owner".into(),
                    source: "source".into(),
                    quorum: 1,
                };
                let granted = locker.lock(&args).await;
                if granted == Ok(true) {
                    let _ = locker.unlock(&args).await;
                }
                granted
            }
        });
        for (i, result) in futures::future::join_all(calls)
            .await
            .into_iter()
            .enumerate()
        {
            if result != Ok(true) {
                failed.push(format!("round {round}, call {i}: {result:?}"));
            }
        }
    }
    running.abort();
    assert!(
        failed.is_empty(),
        "calls made together after an idle close failed:\n{}",
        failed.join("\n")
    );
}
