//! Reproduces a past break: a TLS client turned away by a TLS server whose every slot was taken was told to check that the server serves TLS, blaming its configuration for a server that was only full.
//!
//! PROTOCOL.md (Handshake): "When every connection is authenticated, it
//! closes the new one as soon as it accepted it; the client sees the
//! connection closed during the handshake and retries later as for any
//! unreachable server." docs/lock-servers.md: `connect_error()` "says why
//! it is offline, in words: ... the server serves TLS and the client does
//! not, or the other way round; ...". A plain client of a full plain
//! server hears "the server closed the connection during the handshake".
//! A TLS client of a full TLS server, closed the same way before its TLS
//! handshake, hears "the server closed the connection during the TLS
//! handshake: check that it serves TLS": the server does serve TLS, the
//! client is configured right, and the words send the operator after a
//! TLS mismatch that is not there.
//!
//! A TLS server with one slot (`max_connections` 1, no admin reserve, no
//! door), held by a first locker; a second locker connects and is turned
//! away. Real time (sockets and TLS), every wait bounded.
#![cfg(feature = "tls")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{
    ClientTls, LockServer, RemoteConfig, RemoteLocker, ServerConfig, ServerTls,
};
use quorum_lock::{LocalLocker, NetLocker};

use crate::loopback;
use crate::tls_files::{CA, NODE_CERT, NODE_KEY};

const TOKEN: &str = "client-secret";

fn client_config() -> RemoteConfig {
    let mut config = RemoteConfig::new(TOKEN);
    config.tls = Some(
        ClientTls::new(CA)
            .and_then(|tls| tls.server_name("localhost"))
            .expect("client tls"),
    );
    config
}

async fn connect(addr: &str) -> RemoteLocker {
    tokio::time::timeout(
        Duration::from_secs(5),
        RemoteLocker::connect(addr.to_owned(), client_config()),
    )
    .await
    .expect("connect ended in time")
    .expect("the token is the server's")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_tls_server_is_not_said_to_serve_no_tls() {
    let tls = ServerTls::from_pem(NODE_CERT, NODE_KEY).expect("server tls");
    let mut server_config = ServerConfig::new(TOKEN).tls(tls);
    server_config.max_connections = 1;
    server_config.admin_reserve = 0;
    server_config.door = 0;
    let server =
        LockServer::new(Arc::new(LocalLocker::new()), server_config).expect("valid config");
    let (bound, _stop) = loopback::serve(server).await;
    let addr = bound.to_string();

    let first = connect(&addr).await;
    assert!(first.is_online(), "{:?}", first.connect_error());

    let second = connect(&addr).await;
    assert!(!second.is_online(), "the server had one slot, held");
    let why = second
        .connect_error()
        .expect("an offline locker says why")
        .to_string();
    assert!(
        !why.contains("serves TLS"),
        "a TLS server that was full was blamed on its TLS: {why}"
    );
    drop(second);
    drop(first);
}
