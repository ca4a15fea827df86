//! A hostile lock server (a compromised one, or without TLS anyone who
//! answers in its place) "cannot reach beyond what the library returns"
//! (docs/lock-servers.md, "A hostile server"). One that accepts every
//! handshake and then sends a frame that does not decode makes the client
//! warn ("undecodable response") and reconnect at once, at the first
//! step of its backoff every time, since each reconnect succeeds: a warning
//! and an info line every few tens of milliseconds, for as long as the
//! locker lives, in the log of every application that embeds the client.
#![cfg(feature = "net")]

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::wire::{accepted, frame, VERSION_5};
use quorum_lock::net::{RemoteConfig, RemoteLocker};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// How long the client is watched.
const WATCHED: Duration = Duration::from_secs(2);

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<(Level, String)>>>);

struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, " {}={value:?}", field.name());
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut line = Line(String::new());
        event.record(&mut line);
        self.0
            .lock()
            .unwrap()
            .push((*event.metadata().level(), line.0));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

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
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    let addr = garbling_server().await;
    let locker = RemoteLocker::connect(addr, RemoteConfig::new("client-secret"))
        .await
        .expect("a locker");
    tokio::time::sleep(WATCHED).await;
    let lines = capture.0.lock().unwrap().clone();
    assert!(
        lines.iter().any(|(_, l)| l.contains("undecodable")),
        "the client never read the server's frame: {lines:?}"
    );
    let warnings: Vec<&String> = lines
        .iter()
        .filter(|(level, _)| *level <= Level::WARN)
        .map(|(_, l)| l)
        .collect();
    let infos = lines
        .iter()
        .filter(|(level, _)| *level == Level::INFO)
        .count();
    assert!(
        warnings.len() < 10,
        "in {WATCHED:?}, a server that garbles every connection made the client write {} \
         warnings and {infos} info lines; the first: {:?}",
        warnings.len(),
        warnings.first()
    );
    drop(locker);
}
