//! Reproduces a past break: a TLS 1.3 server that refuses the client with a fatal alert after the client's side of the TLS handshake is done (where TLS 1.3 puts every check of a client certificate) is worded "handshake failed: received fatal alert: ...", which `status` and `locks` read as a server that closed or reset the connection in its handshake, so they wait 2 s for a server that refuses every attempt.
//!
//! docs/cli.md: "`status` and `locks` give a lock server that closed or
//! reset the connection during the handshake, or turned it away as busy
//! (as a server at its connection limit does under a flood), up to 2 s to
//! take the connection its client opens again in the background";
//! cli/src/fleet.rs (`reconnected`): "a server that did not answer
//! (refused, no route, a timeout) is not waited for". 454d450 words a fatal
//! alert received in the TLS handshake as a refusal ("TLS handshake
//! failed: ..."), outside the grace. With TLS 1.3 the client's handshake
//! ends as it sends its certificate and Finished; the server checks them
//! afterwards, so its refusal arrives as an alert where the lock
//! handshake waits for the `Welcome`. An alert that names no certificate
//! problem (a `handshake_failure` from a check of the client that fails
//! for another reason, an `illegal_parameter`) is worded there as
//! "handshake failed: received fatal alert: HandshakeFailure": the words
//! the command line reads as a server that ended the connection.
//!
//! A stand-in TLS 1.3 server on 127.0.0.1 asks for a client certificate
//! and refuses the one it gets with an error that is no certificate
//! error (rustls answers it with a fatal `handshake_failure` alert), then
//! reads what the client still sends and closes. The same stand-in held
//! to TLS 1.2, whose alert arrives inside the TLS handshake, is the
//! reference. Real time (sockets and TLS), every wait bounded.
#![cfg(feature = "tls")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{ClientTls, RemoteConfig, RemoteLocker};
use quorum_lock::{Error, NetLocker};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::tls_files::{CA, CLIENT_CERT, CLIENT_KEY, NODE_CERT, NODE_KEY};

/// The words cli/src/fleet.rs reads as a server that ended the connection
/// in its handshake.
const GRACED: [&str; 3] = [
    "the server closed the connection during the handshake",
    "handshake failed",
    "the server turned the connection away",
];

/// Checks client certificates as the CA says, then refuses every one with
/// an error that names no certificate problem (as a server whose check of
/// the client failed for another reason does).
#[derive(Debug)]
struct Refusing(Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for Refusing {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Err(rustls::Error::General(
            "this client is not admitted here".into(),
        ))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

fn acceptor(version: &'static rustls::SupportedProtocolVersion) -> tokio_rustls::TlsAcceptor {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = CertificateDer::pem_slice_iter(NODE_CERT)
        .collect::<Result<Vec<_>, _>>()
        .expect("certificate");
    let key = PrivateKeyDer::from_pem_slice(NODE_KEY).expect("key");
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(CA) {
        roots.add(cert.expect("ca")).expect("root");
    }
    let webpki = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .expect("verifier");
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[version])
        .expect("versions")
        .with_client_cert_verifier(Arc::new(Refusing(webpki)))
        .with_single_cert(chain, key)
        .expect("server config");
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// Up to 20 connections: each refused by the stand-in server (of TLS
/// `version`) once it has the client's certificate, the rest of what the
/// client sends read, then closed.
async fn refusing(version: &'static rustls::SupportedProtocolVersion) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    tokio::spawn(async move {
        for _ in 0..20 {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor(version);
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(10), async move {
                    match acceptor.accept(stream).into_fallible().await {
                        Ok(_) => {}
                        // The alert went out with the refusal; read on so
                        // that the close is a FIN, not a reset.
                        Err((_, mut stream)) => {
                            let _ = stream.shutdown().await;
                            let mut sink = [0u8; 1024];
                            while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
                        }
                    }
                })
                .await;
            });
        }
    });
    addr
}

/// Why a locker to the stand-in of TLS `version` is offline.
async fn reason_offline(version: &'static rustls::SupportedProtocolVersion) -> String {
    let addr = refusing(version).await;
    let mut config = RemoteConfig::new("client-secret");
    config.connect_timeout = Duration::from_secs(2);
    config.tls = Some(
        ClientTls::new(CA)
            .and_then(|tls| tls.server_name("localhost"))
            .and_then(|tls| tls.client_cert(CLIENT_CERT, CLIENT_KEY))
            .expect("client tls"),
    );
    let locker = tokio::time::timeout(
        Duration::from_secs(10),
        RemoteLocker::connect(&addr, config),
    )
    .await
    .expect("connect ends within its timeout")
    .expect("an offline locker, not an error");
    assert!(!locker.is_online(), "the server refused every connection");
    let reason = match locker.connect_error().expect("an offline locker says why") {
        Error::LockerUnavailable { reason, .. } => reason,
        Error::Tls { reason, .. } => format!("TLS refused: {reason}"),
        other => panic!("unexpected error: {other}"),
    };
    drop(locker);
    reason
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_server_refusing_after_the_clients_tls_flight_gets_no_status_grace() {
    let tls12 = reason_offline(&rustls::version::TLS12).await;
    assert!(
        tls12.contains("HandshakeFailure") && !GRACED.iter().any(|w| tls12.starts_with(w)),
        "the reference: the alert inside the TLS handshake is a refusal: {tls12}"
    );
    let reason = reason_offline(&rustls::version::TLS13).await;
    assert!(
        reason.contains("HandshakeFailure"),
        "the stand-in refused with a handshake_failure alert: {reason}"
    );
    assert!(
        !GRACED.iter().any(|words| reason.starts_with(words)),
        "a TLS 1.3 server that refused the client with a fatal alert after the client's TLS \
         flight is worded as one that closed or reset the connection in its handshake, and gets \
         `status`/`locks`' 2 s grace (the same alert inside the TLS handshake, {tls12:?}, does \
         not): {reason}"
    );
}
