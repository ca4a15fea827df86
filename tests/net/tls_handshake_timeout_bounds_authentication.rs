//! With TLS, the handshake timeout bounds how long a peer may stay
//! connected without authenticating: the TLS handshake and the lock
//! handshake after it together, not each in turn.
#![cfg(feature = "tls")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::net::{LockServer, ServerConfig, ServerTls};
use quorum_lock::LocalLocker;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::AsyncReadExt;

use crate::loopback;

const TOKEN: &str = "client-secret";
/// A self-signed certificate for localhost and 127.0.0.1.
const CERT: &[u8] = include_bytes!("../data/test-cert.pem");
const KEY: &[u8] = include_bytes!("../data/test-key.pem");
const TIMEOUT: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_finishes_tls_late_is_closed_within_the_handshake_timeout() {
    let tls = ServerTls::from_pem(CERT, KEY).expect("server tls");
    let mut config = ServerConfig::new(TOKEN).tls(tls);
    config.handshake_timeout = TIMEOUT;
    let server = LockServer::new(Arc::new(LocalLocker::new()), config).expect("valid config");
    let (bound, stop) = loopback::serve(server).await;

    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(CERT).expect("certificate"))
        .expect("root");
    let client = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocols")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client));

    let opened = Instant::now();
    let tcp = tokio::net::TcpStream::connect(bound)
        .await
        .expect("connect");
    // Start TLS late, within the timeout, then never send the lock
    // handshake.
    tokio::time::sleep(TIMEOUT * 7 / 10).await;
    let name = ServerName::try_from("127.0.0.1").expect("name");
    let mut stream = connector
        .connect(name, tcp)
        .await
        .expect("the TLS handshake completes within the timeout");
    let mut buf = [0u8; 64];
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    let held = opened.elapsed();
    let _ = stop.send(());
    assert!(closed.is_ok(), "the server never closed the connection");
    assert!(
        held < TIMEOUT + Duration::from_millis(400),
        "a peer without a token held its connection for {held:?} with a handshake timeout of \
         {TIMEOUT:?}"
    );
}
