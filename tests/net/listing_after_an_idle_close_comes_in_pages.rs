//! An admin's long-lived `RemoteLocker` whose connection the server closed
//! for idleness still lists a table of more than one reply: the next call
//! opens a connection of protocol version 6, which pages the listing, so
//! the listing must not be asked for the old way (`List`, one reply) just
//! because no connection was open when `locks` was called.
//!
//! Reproduces a past break: the listing was asked for with `List` and refused as over one reply.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LocalLocker, LockArgs, NetLocker};

const TOKEN: &str = "client-secret";
const ADMIN: &str = "admin-secret";
/// The server's idle timeout: long enough that the first listing's pages
/// (a debug build on a busy machine) never wait that long for the next
/// request (at 200 ms one did, in CI, and the server closed the connection
/// mid-listing), short enough to wait out.
const IDLE: Duration = Duration::from_secs(1);
/// More than one listing reply carries (4096 entries).
const ENTRIES: usize = 5000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_lists_a_large_table_after_its_connection_was_closed_for_idleness() {
    let table = Arc::new(LocalLocker::new());
    for i in 0..ENTRIES {
        let args = LockArgs {
            uid: format!("uid-{i}").into(),
            resources: vec![format!("name/{i:05}")].into(),
            owner: "owner".into(),
            source: "source".into(),
            quorum: 1,
        };
        assert_eq!(table.lock(&args).await, Ok(true), "lock {i}");
    }
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.idle_timeout = Some(IDLE);
    let server = LockServer::new(table.clone(), config).expect("valid config");
    let (addr, run) = server
        .bind("127.0.0.1:0".parse().unwrap(), std::future::pending::<()>())
        .await
        .expect("bind loopback");
    let running = tokio::spawn(run);

    let admin = RemoteLocker::connect(addr.to_string(), RemoteConfig::new(ADMIN))
        .await
        .expect("connect with the admin token");
    // Freshly connected, the listing comes in pages.
    let listed = admin.locks().await.expect("the first listing");
    assert_eq!(listed.len(), ENTRIES, "the first listing");

    // The admin looks again later, after the server closed its idle
    // connection; the locker reconnects with its next call.
    tokio::time::sleep(IDLE * 3).await;
    let again = admin.locks().await;
    running.abort();
    match again {
        Ok(listed) => assert_eq!(listed.len(), ENTRIES, "the listing after an idle close"),
        Err(err) => panic!(
            "the listing after an idle close failed, though the new connection speaks \
             protocol version {:?}: {err}",
            admin.protocol_version()
        ),
    }
}
