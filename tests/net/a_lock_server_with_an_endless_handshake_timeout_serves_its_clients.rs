//! Reproduces a past break: a lock server whose `handshake_timeout` is `Duration::MAX` (which `LockServer::new` accepts) panics on every connection it accepts, adding the timeout to the clock for the handshake's deadline, and serves no client.
//!
//! src/net/config.rs: `handshake_timeout` is "How long a client has to
//! authenticate after connecting"; `LockServer::new` refuses the configs
//! it cannot serve (a zero `idle_timeout`, no connections, a zero
//! validity) and accepts this one. `session::accept` computes
//! `Instant::now() + handshake_timeout`, which overflows. (A validity of
//! `Duration::MAX` was made to work in the fix for review 90.)
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::NetLocker;

use crate::node::{args, start, TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_server_with_an_endless_handshake_timeout_serves_its_clients() {
    let mut config = ServerConfig::new(TOKEN);
    config.handshake_timeout = Duration::MAX;
    let node = start(config).await;
    let served = tokio::time::timeout(Duration::from_secs(10), async {
        let client = RemoteLocker::connect(node.addr.clone(), RemoteConfig::new(TOKEN))
            .await
            .map_err(|err| format!("connect: {err}"))?;
        client
            .lock(&args("endless-handshake", &["a".to_string()]))
            .await
            .map_err(|err| format!("lock: {err}"))
    })
    .await
    .expect("answered within 10 s");
    assert_eq!(
        served,
        Ok(true),
        "a server accepting a handshake_timeout of Duration::MAX serves no client"
    );
}
