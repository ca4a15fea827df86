//! Reproduces a past break: a TLS server that refuses the client's TLS handshake with a fatal alert (no TLS version or cipher suite in common) is worded as a lock server that closed or reset the connection in its handshake, so `status` and `locks` wait 2 s for a server that will refuse every attempt.
//!
//! docs/cli.md: "`status` and `locks` give a lock server that closed or
//! reset the connection during the handshake, or turned it away as busy
//! (as a server at its connection limit does under a flood), up to 2 s to
//! take the connection its client opens again in the background"; and
//! cli/src/fleet.rs (`reconnected`): "a server that did not answer
//! (refused, no route, a timeout) is not waited for". The grace is read
//! from the reason's first words ("the server closed the connection during
//! the handshake", "handshake failed", "the server turned the connection
//! away"). Since 6b1512c, every failure of the TLS handshake that is not a
//! close, not a certificate and not a plain answer is worded "handshake
//! failed (TLS's): ...", so a server that answers the ClientHello with a
//! fatal `protocol_version` or `handshake_failure` alert (it speaks no TLS
//! version, or no cipher suite, this client offers: a setting that no
//! retry mends) reads as one that ended the connection and gets the grace.
//!
//! A stand-in on 127.0.0.1 reads the client's first TLS record header and
//! answers with a plaintext fatal alert record, then drains and closes.
//! Real time (sockets), every wait bounded.
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

/// A listener that answers each connection's ClientHello with a fatal TLS
/// alert of `description`.
async fn alerting(description: u8) -> String {
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
                    // An alert record: content type 21, TLS 1.2, two
                    // bytes: level fatal (2) and the description.
                    let alert = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, description];
                    if peer.write_all(&alert).await.is_err() {
                        return;
                    }
                    let _ = peer.shutdown().await;
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
        Error::Tls { reason, .. } => format!("TLS refused: {reason}"),
        other => panic!("unexpected error: {other}"),
    }
}

#[tokio::test]
async fn a_tls_server_refusing_with_an_alert_gets_no_status_grace() {
    // protocol_version (70), handshake_failure (40).
    for description in [70u8, 40] {
        let addr = alerting(description).await;
        let reason = reason_offline(&addr).await;
        assert!(
            !GRACED.iter().any(|words| reason.starts_with(words)),
            "a TLS server that refused the handshake with fatal alert {description} is \
             worded as one that closed or reset it, and gets `status`/`locks`' 2 s grace: \
             {reason}"
        );
    }
}
