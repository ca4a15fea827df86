//! What a hostile lock server sends reaches the library's logs escaped
//! (docs/lock-servers.md, "A hostile server": its text "is escaped before
//! it enters an `Error` or a log"): an unsolicited push names a uid of the
//! server's choosing, and the client logs a push for a uid nobody waits
//! on. Logged raw, a newline in it forges a log line and an override
//! reverses what follows, in any application that embeds the client and
//! writes its logs with a formatter that does not escape them.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::log_capture::Capture;
use crate::wire::{accepted, frame, string, varint, GRANTED, REPLY_PUSH, VERSION_5};
use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::NetLocker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A uid that forges a log line and reverses the text after it.
const HOSTILE_UID: &str = "u\u{202e}dilav\nERROR forged-line: token accepted";

/// A server that accepts any token, then pushes a wake-up for
/// [`HOSTILE_UID`], which nobody waits on, and keeps the connection open.
async fn pushing_server() -> String {
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
        let _ = peer
            .write_all(&frame(&accepted(VERSION_5, Duration::from_secs(30))))
            .await;
        // Response { id: 0 (unsolicited), reply: Push { uid, Granted } }.
        let mut push = varint(0);
        push.push(REPLY_PUSH);
        push.extend(string(HOSTILE_UID.as_bytes()));
        push.push(GRANTED);
        let _ = peer.write_all(&frame(&push)).await;
        while peer.read(&mut buf).await.unwrap_or(0) > 0 {}
    });
    addr
}

// The client's reader runs on this test's thread (a current-thread
// runtime), where the capture is the default subscriber.
#[tokio::test]
async fn a_push_for_an_unknown_uid_is_logged_with_the_servers_uid_escaped() {
    let (capture, _guard) = Capture::install();
    let addr = pushing_server().await;
    let locker = RemoteLocker::connect(addr.clone(), RemoteConfig::new("client-secret"))
        .await
        .expect("a locker");
    assert!(locker.is_online(), "the fake server accepted the handshake");
    // Bounded: the push arrives within a round trip on loopback.
    let mut logged = Vec::new();
    for _ in 0..200 {
        logged = capture.lines();
        logged.retain(|l| l.contains("dilav") || l.contains("forged-line"));
        if !logged.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        !logged.is_empty(),
        "the push was not logged at all: {:?}",
        capture.lines()
    );
    for line in &logged {
        assert!(
            !line.contains('\n') && !line.contains('\u{202e}'),
            "a log line holds the server's newline or override raw: {line:?}"
        );
    }
    drop(locker);
}
