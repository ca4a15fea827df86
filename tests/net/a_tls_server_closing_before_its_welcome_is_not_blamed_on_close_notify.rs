//! Reproduces a past break: a TLS server that closed the connection after the TLS handshake but before its `Welcome` was reported as a failed handshake over a missing TLS close_notify, where a plain server closing at the same point is reported as having closed the connection during the handshake.
//!
//! PROTOCOL.md (Handshake) and docs/lock-servers.md: a client whose
//! connection the server closes in the handshake "sees the connection
//! closed during the handshake and retries later as for any unreachable
//! server"; `connect_error()` "says why it is offline, in words". A
//! server closes there when it shuts down, or evicts a connection still
//! in its handshake to make room, or when a TLS-terminating proxy in
//! front of it finds its backend gone; a TLS server drops such a stream
//! without a close_notify, as it does an idle one. Over plain TCP the
//! client hears "the server closed the connection during the handshake".
//! Over TLS it hears "handshake failed: peer closed connection without
//! sending TLS close_notify: https://docs.rs/rustls/...": the end of the
//! stream is read as a TLS fault of the server's (the break fixed for the
//! reader after an idle close, left in the lock handshake), and the words
//! send the operator after its TLS set-up.
//!
//! A stand-in TLS server on 127.0.0.1 completes the TLS handshake, reads
//! the client's `Hello` and drops the stream (no close_notify, no
//! `Welcome`); the same stand-in without TLS is the reference. Real time
//! (sockets and TLS), every wait bounded.
#![cfg(feature = "tls")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{ClientTls, RemoteConfig, RemoteLocker};
use quorum_lock::NetLocker;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::TcpListener;

use crate::tls_files::{CA, NODE_CERT, NODE_KEY};

fn acceptor() -> tokio_rustls::TlsAcceptor {
    let chain = CertificateDer::pem_slice_iter(NODE_CERT)
        .collect::<Result<Vec<_>, _>>()
        .expect("certificate");
    let key = PrivateKeyDer::from_pem_slice(NODE_KEY).expect("key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .expect("server config");
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// Reads one length-delimited frame (the client's `Hello`, at most 4 KiB).
async fn read_hello(stream: &mut (impl AsyncRead + Unpin)) -> bool {
    let mut len = [0u8; 4];
    if stream.read_exact(&mut len).await.is_err() {
        return false;
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > 4096 {
        return false;
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await.is_ok()
}

/// Accepts up to 20 connections; for each, the TLS handshake (with
/// `tls`), the client's `Hello` read, then the stream dropped unanswered.
async fn close_after_hello(listener: TcpListener, tls: bool) {
    for _ in 0..20 {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let acceptor = acceptor();
        tokio::spawn(async move {
            let served = tokio::time::timeout(Duration::from_secs(5), async move {
                if tls {
                    if let Ok(mut stream) = acceptor.accept(stream).await {
                        // Dropped without a close_notify, as a server drops
                        // a stream it closes.
                        read_hello(&mut stream).await;
                    }
                } else {
                    let mut stream = stream;
                    read_hello(&mut stream).await;
                }
            });
            let _ = served.await;
        });
    }
}

/// What `connect_error()` says of the stand-in, with or without TLS.
async fn why_offline(tls: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let server = tokio::spawn(close_after_hello(listener, tls));
    let mut config = RemoteConfig::new("client-secret");
    if tls {
        config.tls = Some(
            ClientTls::new(CA)
                .and_then(|tls| tls.server_name("localhost"))
                .expect("client tls"),
        );
    }
    let locker = tokio::time::timeout(Duration::from_secs(5), RemoteLocker::connect(addr, config))
        .await
        .expect("connect ended in time")
        .expect("a server that closes is no error at connect");
    let online = locker.is_online();
    let why = locker
        .connect_error()
        .map(|err| err.to_string())
        .unwrap_or_default();
    drop(locker);
    server.abort();
    assert!(!online, "no Welcome came: the locker is offline");
    why
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_server_closing_before_its_welcome_is_not_blamed_on_close_notify() {
    let plain = why_offline(false).await;
    assert!(
        plain.contains("closed the connection during the handshake"),
        "the plain reference: {plain}"
    );
    let tls = why_offline(true).await;
    assert!(
        tls.contains("closed the connection") && !tls.contains("close_notify"),
        "a TLS server that closed the connection before its Welcome (as a plain one is told: \
         {plain:?}) was reported as: {tls}"
    );
}
