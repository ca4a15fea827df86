//! Reproduces a past break: over TLS, a call whose request the TLS layer took into its own buffer but never put on the socket (the connection's runtime went idle) failed as a server timeout (`LockerTimeout`), since the writer counts a write's bytes as written when it returns.
//!
//! The `RemoteLocker` rustdoc, "Runtimes": if the connection lives on a
//! current-thread runtime that is idle but not dropped, "a call waits out
//! `call_timeout`, fails with `Error::LockerUnavailable` saying so". The
//! writer counts bytes as each write returns; over TLS a write returns
//! once rustls holds the bytes in its buffer, and on a full socket they
//! leave it only when the writer is polled again (its flush). Here the
//! server does not read while the connection's runtime is driven, so the
//! socket fills and the last request taken waits whole in rustls's
//! buffer; then that runtime goes idle, and the server reads every byte
//! that reaches it. That request never reaches the server, through no
//! doing of the server, yet its call is said to have timed out there.
#![cfg(feature = "tls")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{ClientTls, RemoteConfig};
use quorum_lock::{Error, LockArgs, NetLocker};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;
use tokio::sync::oneshot;

use crate::stand_in;
use crate::tls_files::{CA, NODE_CERT, NODE_KEY};
use crate::wire;

/// How many calls the test makes at most, 10 ms apart.
const CALLS: usize = 150;

/// A lock request of about 32 KiB (32 names of 1000 bytes), less than
/// what rustls buffers (64 KiB); all are the same size.
fn request(i: usize) -> LockArgs {
    let uid = format!("call-{i:04}");
    LockArgs {
        uid: uid.clone().into(),
        resources: (0..32)
            .map(|n| format!("{uid}/{n:02}/{}", "x".repeat(988)))
            .collect::<Vec<_>>()
            .into(),
        owner: "owner".into(),
        source: "source".into(),
        quorum: 1,
    }
}

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

/// Complete frames in `bytes` (a length-delimited stream from its start).
fn complete_frames(bytes: &[u8]) -> usize {
    let mut at = 0usize;
    let mut frames = 0usize;
    while bytes.len() >= at + 4 {
        let len = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        if bytes.len() < at + 4 + len {
            break;
        }
        at += 4 + len;
        frames += 1;
    }
    frames
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_request_sits_in_the_tls_buffer_on_an_idle_runtime_says_so() {
    // A small receive buffer, so that the requests soon fill the socket
    // while the server does not read.
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("receive buffer");
    socket.bind("127.0.0.1:0".parse().unwrap()).expect("bind");
    let listener = socket.listen(16).expect("listen");
    let addr = listener.local_addr().expect("address").to_string();

    let (drain_tx, drain_rx) = oneshot::channel::<()>();
    // How many requests the server received whole, all told.
    let (drained_tx, drained_rx) = oneshot::channel::<usize>();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.expect("accept");
        let mut tls = acceptor().accept(tcp).await.expect("TLS handshake");
        let mut header = [0u8; 4];
        tls.read_exact(&mut header).await.expect("hello length");
        let mut hello = vec![0u8; u32::from_be_bytes(header) as usize];
        tls.read_exact(&mut hello).await.expect("hello");
        tls.write_all(&wire::frame(&wire::accepted(
            wire::VERSION_6,
            Duration::from_secs(10),
        )))
        .await
        .expect("welcome");
        tls.flush().await.expect("flush");
        // Reads nothing until told, then every byte that reaches it until
        // none came for 1 s; answers nothing.
        let _ = tokio::time::timeout(Duration::from_secs(20), drain_rx).await;
        let mut got = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match tokio::time::timeout(Duration::from_secs(1), tls.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
                Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            }
        }
        let _ = drained_tx.send(complete_frames(&got));
        // Keeps reading (the server is not what holds the rest back).
        let _ = tokio::time::timeout(Duration::from_secs(10), async {
            while let Ok(n) = tls.read(&mut buf).await {
                if n == 0 {
                    return;
                }
            }
        })
        .await;
    });

    let mut config = RemoteConfig::new("client-secret");
    config.connect_timeout = Duration::from_secs(2);
    config.call_timeout = Duration::from_secs(6);
    config.tls = Some(
        ClientTls::new(CA)
            .and_then(|t| t.server_name("localhost"))
            .expect("client tls"),
    );

    // The locker is made on a current-thread runtime of a thread of its
    // own, driven until told, then idle (not dropped) until released.
    let (locker, mut driven) =
        stand_in::connect_on_a_runtime_driven_until_told(addr, config, Duration::from_secs(10))
            .await;
    assert!(locker.is_online(), "connected");

    // Requests one after the other while the connection's runtime is
    // driven: the writer takes each and writes what the socket holds.
    let mut calls = Vec::new();
    for i in 0..CALLS {
        let locker = locker.clone();
        calls.push(tokio::spawn(async move { locker.lock(&request(i)).await }));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The connection's runtime stops being driven; then the server reads
    // all that reaches it.
    driven.go_idle().await;
    let _ = drain_tx.send(());
    let received = tokio::time::timeout(Duration::from_secs(20), drained_rx)
        .await
        .expect("the server drained the socket")
        .expect("server");
    // (The hello was read before the drain: `received` counts requests
    // only.)

    let mut outcomes = Vec::new();
    for call in calls {
        let outcome = tokio::time::timeout(Duration::from_secs(15), call)
            .await
            .expect("each call ended within its call timeout and some")
            .expect("call task");
        outcomes.push(outcome);
    }
    driven.shut_down().await;
    server.abort();

    assert!(
        received < CALLS,
        "the test needs the requests not to fit the socket's buffers: the server received all \
         {received}"
    );
    // Calls are numbered as they were made, and their requests went out in
    // that order: the server received the first `received` whole.
    let blamed: Vec<usize> = outcomes
        .iter()
        .enumerate()
        .filter(|(i, o)| *i >= received && matches!(o, Err(Error::LockerTimeout { .. })))
        .map(|(i, _)| i)
        .collect();
    assert!(
        blamed.is_empty(),
        "calls {blamed:?} failed with LockerTimeout, blaming the server, though the server, \
         reading every byte that reached it, received only the first {received} requests whole: \
         their requests sat in the TLS layer's buffer of a writer whose runtime went idle, and \
         the call should say so (LockerUnavailable, RemoteLocker rustdoc \"Runtimes\"); the call \
         after them: {:?}",
        outcomes.get(received + blamed.len())
    );
}
