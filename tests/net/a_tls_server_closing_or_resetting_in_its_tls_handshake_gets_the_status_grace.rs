//! Reproduces a past break: a TLS lock server that closed or reset the connection during the TLS handshake (as one at its connection limit does) is reported in words that `status` and `locks` do not read as a server that closed or reset it during the handshake, so they give it no grace to take the connection opened again.
//!
//! docs/cli.md: "`status` and `locks` give a lock server that closed or
//! reset the connection during the handshake, or turned it away as busy
//! (as a server at its connection limit does under a flood), up to 2 s to
//! take the connection its client opens again in the background, before
//! they call it unreachable." cli/src/fleet.rs (`reconnected`) grants that
//! grace only to a `LockerUnavailable` whose reason starts with "the server
//! closed the connection during the handshake", "handshake failed" or "the
//! server turned the connection away". A TLS server at its connection limit
//! closes the new connection at once, before its TLS handshake: the client
//! hears "the server closed the connection during the TLS handshake, before
//! answering it: it may be full ..." on a close, and "TLS handshake failed:
//! Connection reset by peer ..." on a reset, neither of which the command
//! line reads as such, so over TLS a full server shows as unreachable at
//! once, where over plain TCP it gets its 2 s.
//!
//! A stand-in on 127.0.0.1 takes the connection, reads the client's first
//! TLS bytes, and then closes its side in good order (FIN) or resets it
//! (SO_LINGER 0). Real time (sockets), every wait bounded.
#![cfg(feature = "tls")]

use std::time::Duration;

use quorum_lock::net::{ClientTls, RemoteConfig, RemoteLocker};
use quorum_lock::{Error, NetLocker};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const CA: &[u8] = include_bytes!("../data/tls/ca.pem");

/// The words cli/src/fleet.rs reads as a server that ended the connection
/// in its handshake.
const GRACED: [&str; 3] = [
    "the server closed the connection during the handshake",
    "handshake failed",
    "the server turned the connection away",
];

/// A listener that reads the first bytes of each connection (the client's
/// TLS ClientHello) and then closes its side (`reset`: with a reset).
async fn ending(reset: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    tokio::spawn(async move {
        for _ in 0..20 {
            let Ok((mut peer, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(10), async move {
                    let mut first = [0u8; 5];
                    if peer.read_exact(&mut first).await.is_err() {
                        return;
                    }
                    if reset {
                        let _ = peer.set_zero_linger();
                        drop(peer);
                        return;
                    }
                    let _ = peer.shutdown().await;
                    // Drain whatever the client sends, so that the close
                    // stays a close (no unread bytes, no reset).
                    let mut sink = [0u8; 1024];
                    while matches!(peer.read(&mut sink).await, Ok(n) if n > 0) {}
                })
                .await;
            });
        }
    });
    addr
}

async fn reason_offline(addr: &str) -> String {
    let mut config = RemoteConfig::new("client-secret");
    config.connect_timeout = Duration::from_secs(2);
    config.tls = Some(
        ClientTls::new(CA)
            .and_then(|tls| tls.server_name("localhost"))
            .expect("client tls"),
    );
    let locker = tokio::time::timeout(Duration::from_secs(10), RemoteLocker::connect(addr, config))
        .await
        .expect("connect ends within its timeout")
        .expect("an offline locker, not an error");
    assert!(!locker.is_online());
    match locker.connect_error().expect("an offline locker says why") {
        Error::LockerUnavailable { reason, .. } => reason,
        other => panic!("not a LockerUnavailable: {other}"),
    }
}

fn assert_graced(reason: &str) {
    assert!(
        GRACED.iter().any(|words| reason.starts_with(words)),
        "a lock server that ended the connection in its (TLS) handshake gets no grace from \
         `status`/`locks`: {reason}"
    );
}

#[tokio::test]
async fn a_tls_server_closing_in_its_tls_handshake_gets_the_status_grace() {
    let addr = ending(false).await;
    assert_graced(&reason_offline(&addr).await);
}

#[tokio::test]
async fn a_tls_server_resetting_in_its_tls_handshake_gets_the_status_grace() {
    let addr = ending(true).await;
    assert_graced(&reason_offline(&addr).await);
}
