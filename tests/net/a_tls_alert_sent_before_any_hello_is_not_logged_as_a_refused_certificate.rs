//! Reproduces a past break: a peer that sends a TLS alert as its first record, before any ClientHello, is logged by a TLS lock server at `warn` as "the client refused this server's certificate", a certificate the server never sent.
//!
//! docs/lock-servers.md, "TLS": the server logs the other side of a failed
//! TLS handshake "as a warning in the same words (a client that speaks TLS,
//! a client that does not, a client without a certificate, a client that
//! refused the server's certificate ...)". The server names every alert it
//! receives that way, whatever the alert and whenever it comes: a peer
//! without a token (a scanner, a client that gives up on the version or
//! the cipher suites, or one that wants to mislead the operator) makes the
//! server's log blame a certificate it never presented, sending the
//! operator to check CAs and names that are fine.
//!
//! A TLS lock server on 127.0.0.1; a raw TCP peer writes one fatal
//! `handshake_failure` alert record and waits to be closed. Real time
//! (sockets), every wait bounded.
#![cfg(feature = "tls")]

use std::sync::Arc;
use std::time::Duration;

use crate::log_capture::Capture;
use crate::loopback;
use crate::tls_files::{NODE_CERT, NODE_KEY};
use quorum_lock::net::{LockServer, ServerConfig, ServerTls};
use quorum_lock::LocalLocker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TOKEN: &str = "client-secret";

/// A TLS record of content type alert (0x15), version TLS 1.2, two bytes:
/// level fatal (2), description handshake_failure (40).
const ALERT: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28];

// The server's tasks run on this test's thread (a current-thread
// runtime), where the capture is the default subscriber.
#[tokio::test]
async fn a_tls_alert_sent_before_any_hello_is_not_logged_as_a_refused_certificate() {
    let (capture, _guard) = Capture::install();
    let tls = ServerTls::from_pem(NODE_CERT, NODE_KEY).expect("server tls");
    let config = ServerConfig::new(TOKEN).tls(tls);
    let server = LockServer::new(Arc::new(LocalLocker::new()), config).expect("valid config");
    let (bound, _stop) = loopback::serve(server).await;

    let mut peer = TcpStream::connect(bound).await.expect("connect");
    peer.write_all(&ALERT).await.expect("send the alert");
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), peer.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the peer was not closed");
    tokio::time::sleep(Duration::from_millis(50)).await;

    let warned = capture.at_least(tracing::Level::WARN);
    assert!(
        !warned.is_empty(),
        "the failed TLS handshake was not logged at all: {:#?}",
        capture.lines()
    );
    for line in &warned {
        assert!(
            !line.contains("refused this server's certificate"),
            "the server blames a certificate it never sent (no ClientHello came, so no \
             certificate went out): {line}"
        );
    }
}
