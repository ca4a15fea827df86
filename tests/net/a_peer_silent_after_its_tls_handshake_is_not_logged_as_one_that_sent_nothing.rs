//! Reproduces a past break: a peer that completes its TLS handshake with a TLS lock server and then sends no lock handshake is logged at `warn` as one of the "connections that sent nothing".
//!
//! docs/lock-servers.md, "Threat model": the handshake timeout "bounds the
//! TLS handshake and the lock handshake together", and the server's
//! refusal lines name their cause (the server tells "closed connections
//! that sent nothing" from "sent only part of a handshake" and from "no
//! TLS handshake within the handshake timeout: closed connections that did
//! not start TLS"). A peer that finished a whole TLS handshake, with a
//! certificate the server's CA signed when TLS is mutual (a TLS health
//! check, a client that stalls after TLS, another TLS service pointed at
//! the port), has sent a good deal; the line sends the operator looking
//! for silent port scanners instead of for a TLS peer that does not speak
//! the lock protocol.
//!
//! A TLS lock server with a 300 ms handshake timeout on 127.0.0.1; a rustls
//! client trusting its CA completes TLS, sends nothing more and waits to be
//! closed. Real time (sockets and TLS), every wait bounded.
#![cfg(feature = "tls")]

use std::sync::Arc;
use std::time::Duration;

use crate::log_capture::Capture;
use crate::loopback;
use crate::tls_files::{CA, NODE_CERT, NODE_KEY};
use quorum_lock::net::{LockServer, ServerConfig, ServerTls};
use quorum_lock::LocalLocker;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::RootCertStore;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

const TOKEN: &str = "client-secret";

fn connector() -> tokio_rustls::TlsConnector {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(CA) {
        roots.add(cert.expect("CA pem")).expect("CA certificate");
    }
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

// The server's tasks run on this test's thread (a current-thread
// runtime), where the capture is the default subscriber.
#[tokio::test]
async fn a_peer_silent_after_its_tls_handshake_is_not_logged_as_one_that_sent_nothing() {
    let (capture, _guard) = Capture::install();
    let tls = ServerTls::from_pem(NODE_CERT, NODE_KEY).expect("server tls");
    let mut config = ServerConfig::new(TOKEN).tls(tls);
    config.handshake_timeout = Duration::from_millis(300);
    let server = LockServer::new(Arc::new(LocalLocker::new()), config).expect("valid config");
    let (bound, _stop) = loopback::serve(server).await;

    let tcp = TcpStream::connect(bound).await.expect("connect");
    let name = ServerName::try_from("localhost").expect("a name");
    let mut tls = tokio::time::timeout(Duration::from_secs(5), connector().connect(name, tcp))
        .await
        .expect("TLS within 5 s")
        .expect("the TLS handshake completes");
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the peer was not closed");
    tokio::time::sleep(Duration::from_millis(50)).await;

    let warned = capture.at_least(tracing::Level::WARN);
    assert!(
        !warned.is_empty(),
        "the timed-out handshake was not logged at all: {:#?}",
        capture.lines()
    );
    for line in &warned {
        assert!(
            !line.contains("sent nothing"),
            "a peer that completed a TLS handshake is logged as one that sent nothing: {line}"
        );
    }
}
