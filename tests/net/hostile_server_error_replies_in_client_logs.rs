//! A hostile lock server (a compromised one, or without TLS anyone who
//! answers in its place) "cannot reach beyond what the library returns"
//! (docs/lock-servers.md, "A hostile server"). Unsolicited error replies
//! cost it four bytes of header each, and the client warns once for each:
//! without a bound, the server writes as many lines as it likes into the
//! log of every application that embeds the client, at warn level, which
//! is what applications keep.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::log_capture::Capture;
use crate::wire::{
    accepted, frame, string, varint, GRANTED, KIND_INVALID_ARGUMENT, REPLY_ERROR, REPLY_PUSH,
    VERSION_5,
};
use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::NetLocker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tracing::Level;

/// Unsolicited error replies the server sends, in one write.
const FLOOD: usize = 5_000;

/// The uid of the push that follows the flood: once the client logged it,
/// it read every frame before it.
const SENTINEL: &str = "end-of-flood-sentinel";

/// Accepts any token, then sends [`FLOOD`] unsolicited error replies and a
/// push for [`SENTINEL`], and keeps the connection open.
async fn flooding_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    tokio::spawn(async move {
        let Ok((mut peer, _)) = listener.accept().await else {
            return;
        };
        let mut buf = [0u8; 512];
        if peer.read(&mut buf).await.unwrap_or(0) == 0 {
            return;
        }
        let mut out = frame(&accepted(VERSION_5, Duration::from_secs(30)));
        // Response { id: 0 (unsolicited), reply: Error { kind, message } }.
        let mut error = varint(0);
        error.push(REPLY_ERROR);
        error.push(KIND_INVALID_ARGUMENT);
        error.extend(string(b"x"));
        for _ in 0..FLOOD {
            out.extend(frame(&error));
        }
        let mut push = varint(0);
        push.push(REPLY_PUSH);
        push.extend(string(SENTINEL.as_bytes()));
        push.push(GRANTED);
        out.extend(frame(&push));
        let _ = peer.write_all(&out).await;
        while peer.read(&mut buf).await.unwrap_or(0) > 0 {}
    });
    addr
}

#[tokio::test]
async fn unsolicited_error_replies_from_a_server_write_a_bounded_number_of_warnings() {
    let (capture, _guard) = Capture::install();
    let addr = flooding_server().await;
    let locker = RemoteLocker::connect(addr, RemoteConfig::new("client-secret"))
        .await
        .expect("a locker");
    assert!(locker.is_online(), "the fake server accepted the handshake");
    // Bounded: 5,000 small frames are read within a second on loopback.
    for _ in 0..500 {
        if !capture.containing(SENTINEL).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        !capture.containing(SENTINEL).is_empty(),
        "the client did not read the whole flood: {} events",
        capture.lines().len()
    );
    let warnings = capture.at_least(Level::WARN);
    assert!(
        warnings.len() < 100,
        "{FLOOD} unsolicited error replies from one server wrote {} warnings; the first: {:?}",
        warnings.len(),
        warnings.first()
    );
    drop(locker);
}
