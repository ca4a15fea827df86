//! A hostile lock server (a compromised one, or without TLS anyone who
//! answers in its place) "cannot reach beyond what the library returns"
//! (docs/lock-servers.md, "A hostile server"). One that accepts every
//! handshake and then sends a frame that does not decode makes the client
//! warn ("undecodable response") and reconnect at once, at the first
//! step of its backoff every time, since each reconnect succeeds: a warning
//! and an info line every few tens of milliseconds, for as long as the
//! locker lives, in the log of every application that embeds the client.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::log_capture::Capture;
use crate::wire::{accepted, frame, VERSION_5};
use quorum_lock::net::{RemoteConfig, RemoteLocker};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tracing::Level;

/// How long the client is watched.
const WATCHED: Duration = Duration::from_secs(2);

/// Accepts every connection's handshake with any token, then sends one
/// frame that is no response and closes. Serves at most 1,000 connections.
async fn garbling_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    tokio::spawn(async move {
        for _ in 0..1_000 {
            let Ok((mut peer, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 512];
                if peer.read(&mut buf).await.unwrap_or(0) == 0 {
                    return;
                }
                let mut out = frame(&accepted(VERSION_5, Duration::from_secs(30)));
                out.extend(frame(&[0xff; 16]));
                let _ = peer.write_all(&out).await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn a_server_that_garbles_every_connection_writes_a_bounded_number_of_warnings() {
    let (capture, _guard) = Capture::install();
    let addr = garbling_server().await;
    let locker = RemoteLocker::connect(addr, RemoteConfig::new("client-secret"))
        .await
        .expect("a locker");
    tokio::time::sleep(WATCHED).await;
    assert!(
        !capture.containing("undecodable").is_empty(),
        "the client never read the server's frame: {:?}",
        capture.lines()
    );
    let warnings = capture.at_least(Level::WARN);
    let infos = capture.at_least(Level::INFO).len() - warnings.len();
    assert!(
        warnings.len() < 10 && infos < 10,
        "in {WATCHED:?}, a server that garbles every connection made the client write {} \
         warnings and {infos} info lines; the first: {:?}",
        warnings.len(),
        warnings.first()
    );
    drop(locker);
}
