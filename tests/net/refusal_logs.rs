//! What the server logs about the connections it refuses: a flood writes
//! a bounded number of lines that count what they stand for, and each
//! line names the refusal's real cause.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use crate::log_capture::{count, Capture};
use crate::loopback;
use crate::wire::{authenticate, closed_within, frame};
use quorum_lock::net::{LockServer, ServerConfig};
use quorum_lock::LocalLocker;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::oneshot;

const TOKEN: &str = "client-secret";
const LIMIT: Duration = Duration::from_secs(5);

async fn start(config: ServerConfig) -> (String, oneshot::Sender<()>) {
    let server = LockServer::new(Arc::new(LocalLocker::new()), config).expect("valid config");
    let (bound, stop) = loopback::serve(server).await;
    (bound.to_string(), stop)
}

// The server's tasks run on this test's thread (a current-thread
// runtime), where the capture is the default subscriber.
#[tokio::test]
async fn a_flood_of_bad_tokens_writes_a_few_lines_that_count_it() {
    let (capture, _guard) = Capture::install();
    let (addr, _stop) = start(ServerConfig::new(TOKEN)).await;
    const FLOOD: u64 = 300;
    let started = tokio::time::Instant::now();
    for _ in 0..FLOOD {
        let (_stream, welcome) = authenticate(&addr, "wrong").await.expect("answered");
        assert_eq!(welcome.first(), Some(&1), "a bad token is rejected");
    }
    let flooded = started.elapsed();
    // After the throttle's interval, the next refusal is logged with the
    // count of those left out meanwhile.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (_stream, _) = authenticate(&addr, "wrong").await.expect("answered");
    let lines = capture.containing("invalid token");
    // One line at the start of each second of the flood, and the last.
    let bound = 2 + flooded.as_secs() as usize + 1;
    assert!(
        !lines.is_empty() && lines.len() <= bound,
        "{} lines for {} refusals in {flooded:?}: {lines:#?}",
        lines.len(),
        FLOOD + 1
    );
    let counted: u64 = lines.iter().map(|l| count(l, "refused")).sum();
    assert_eq!(
        counted,
        FLOOD + 1,
        "the lines count every refusal: {lines:#?}"
    );
}

#[tokio::test]
async fn peers_that_never_send_a_handshake_are_logged_a_few_times() {
    let (capture, _guard) = Capture::install();
    let mut config = ServerConfig::new(TOKEN);
    config.handshake_timeout = Duration::from_millis(100);
    let (addr, _stop) = start(config).await;
    let mut silent = Vec::new();
    for _ in 0..50 {
        silent.push(TcpStream::connect(&addr).await.unwrap());
    }
    for stream in &mut silent {
        closed_within(stream, LIMIT)
            .await
            .expect("closed after the handshake timeout");
    }
    let lines = capture.containing("no handshake");
    assert!(
        !lines.is_empty() && lines.len() <= 3,
        "{} lines for 50 silent peers: {lines:#?}",
        lines.len()
    );
}

#[tokio::test]
async fn a_flood_of_unauthenticated_connections_is_not_blamed_on_authenticated_ones() {
    let (capture, _guard) = Capture::install();
    let mut config = ServerConfig::new(TOKEN);
    config.max_connections = 2;
    config.handshake_timeout = Duration::from_secs(60);
    let (addr, _stop) = start(config).await;
    // Connected while the server's task cannot run (this thread is its
    // runtime's, and blocking connects do not yield), so that it accepts
    // them from its backlog in a burst: more arrive than the connections
    // evicted for them can close.
    let mut flood = Vec::new();
    for _ in 0..100 {
        let stream = std::net::TcpStream::connect(&addr).unwrap();
        stream.set_nonblocking(true).unwrap();
        flood.push(stream);
    }
    let mut flood: Vec<TcpStream> = flood
        .into_iter()
        .map(|s| TcpStream::from_std(s).unwrap())
        .collect();
    // The last ones arrived while the evicted ones were still open: they
    // are closed at once. (Those that took a slot wait for their
    // handshake.)
    let last = flood.last_mut().expect("a flood");
    closed_within(last, LIMIT)
        .await
        .expect("a connection beyond the slots and the evicted ones is closed");
    let all = capture.containing("");
    assert!(
        capture
            .containing("every connection is authenticated")
            .is_empty(),
        "no connection authenticated, yet: {all:#?}"
    );
    // Silent connections beyond the slots wait at the door and are closed
    // there, or, past its room, as a flood of connections that do not
    // authenticate.
    let mut named = capture.containing("that do not authenticate");
    named.extend(capture.containing("sent nothing while every slot was taken"));
    assert!(
        !named.is_empty(),
        "the flood is named for what it is: {all:#?}"
    );
    assert!(named.len() <= 3, "{named:#?}");
}

/// A client with the ordinary token that opens connection after connection,
/// each sending one frame that cannot be decoded, gets each closed, and the
/// log a few lines that count them, not one line per connection.
#[tokio::test]
async fn clients_closed_for_undecodable_frames_are_logged_a_few_times() {
    let (capture, _guard) = Capture::install();
    let (addr, _stop) = start(ServerConfig::new(TOKEN)).await;
    const FLOOD: u64 = 200;
    let started = tokio::time::Instant::now();
    for _ in 0..FLOOD {
        let (mut stream, welcome) = authenticate(&addr, TOKEN).await.expect("answered");
        assert_eq!(welcome.first(), Some(&0), "the client token is accepted");
        // A request with an operation no protocol version has.
        stream.write_all(&frame(&[1, 0x7f])).await.unwrap();
        closed_within(&mut stream, Duration::from_secs(5))
            .await
            .expect("the server hangs up");
    }
    let flooded = started.elapsed();
    let lines = capture.containing("could not be decoded");
    let bound = 2 + flooded.as_secs() as usize + 1;
    assert!(
        !lines.is_empty() && lines.len() <= bound,
        "{} lines for {FLOOD} closed connections in {flooded:?}: {lines:#?}",
        lines.len()
    );
}
