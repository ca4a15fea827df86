//! A lock server broken off in the middle of its `Welcome` (reset, stalled
//! or cut off after the first bytes) is said to have broken off in the
//! handshake, never to be "not a lock server", which would send the
//! operator after the wrong port.
//!
//! `Connection::handshake` judges a failed handshake from the recording of
//! what came, and means to tell, at the connect timeout, a peer that said
//! nothing (maybe a Redis server) from "a lock server that stalled in the
//! middle of its `Welcome`": "the server began to answer the handshake but
//! did not finish within ...: it is stopped or overloaded". A stream that
//! ended (or was reset) during the handshake is "the server closed the
//! connection during the handshake" or "handshake failed: ... reset ...",
//! both of which `quorum-lock status` and `locks` give a grace of 2 s (a
//! server that "closed or reset the connection during the handshake",
//! docs/cli.md).
//!
//! Each scene: a stand-in on 127.0.0.1 reads the client's `Hello`, writes
//! the first bytes of a `Welcome` frame, then resets the connection
//! (SO_LINGER 0), ends its side of it, or keeps it open. Real time
//! (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::NetLocker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the stand-in does after the first bytes of its `Welcome`.
#[derive(Clone, Copy)]
enum Then {
    /// Resets the connection.
    Reset,
    /// Ends its side of the stream, and reads until the client closes.
    Cut,
    /// Keeps the connection open, reading until the client closes.
    Stall,
}

/// Reads the client's `Hello`, one length-delimited frame.
async fn read_hello(peer: &mut TcpStream) -> bool {
    let mut len = [0u8; 4];
    if peer.read_exact(&mut len).await.is_err() {
        return false;
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > 4096 {
        return false;
    }
    let mut body = vec![0u8; len];
    peer.read_exact(&mut body).await.is_ok()
}

/// A listener that answers each connection's `Hello` with `answer`, then
/// does `then`: at most 20 connections, each for at most 10 s.
async fn stand_in(answer: &'static [u8], then: Then) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    tokio::spawn(async move {
        for _ in 0..20 {
            let Ok((mut peer, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(10), async move {
                    if !read_hello(&mut peer).await || peer.write_all(answer).await.is_err() {
                        return;
                    }
                    match then {
                        Then::Reset => {
                            let _ = peer.flush().await;
                            // A close with linger 0 sends a reset.
                            let _ = peer.set_zero_linger();
                            return;
                        }
                        Then::Cut if peer.shutdown().await.is_err() => return,
                        Then::Cut | Then::Stall => {}
                    }
                    let mut buf = [0u8; 512];
                    while peer.read(&mut buf).await.unwrap_or(0) > 0 {}
                })
                .await;
            });
        }
    });
    addr
}

/// Why a locker connecting to `addr` with `connect_timeout` is offline.
async fn why_offline(addr: &str, connect_timeout: Duration) -> String {
    let mut config = RemoteConfig::new("client-secret");
    config.connect_timeout = connect_timeout;
    let locker = tokio::time::timeout(Duration::from_secs(10), RemoteLocker::connect(addr, config))
        .await
        .expect("connect ends within its timeout")
        .expect("an offline locker, not an error");
    assert!(!locker.is_online());
    locker
        .connect_error()
        .map(|e| e.to_string())
        .expect("a reason")
}

/// Checks why a locker is offline whose server resets after `answer`.
async fn reset_after(answer: &'static [u8]) {
    let why = why_offline(&stand_in(answer, Then::Reset).await, Duration::from_secs(2)).await;
    assert!(
        !why.contains("not a lock server"),
        "a lock server reset in its Welcome: {why}"
    );
    assert!(
        why.contains("the server closed the connection during the handshake")
            || why.contains("handshake failed"),
        "a lock server reset in its Welcome: {why}"
    );
}

/// Reproduces a past break: a lock server whose connection is reset after it sent the length of its `Welcome` is reported as "not a lock server" instead of as a server that reset the connection during the handshake.
///
/// A reset after the length (a server killed as it wrote, a proxy or a
/// full server cutting the connection with unread bytes) was "ended" only
/// for an `UnexpectedEof`: the `ConnectionReset` fell through to the
/// sniffer, which named the 4 bytes of our own frame's length as "bytes
/// that are not the lock protocol (00 00 00 14 ...)", and the command
/// line's grace was not given.
#[tokio::test]
async fn a_server_reset_after_the_length_of_its_welcome_is_not_said_to_be_no_lock_server() {
    // The length of a 20-byte frame, then a reset.
    reset_after(&[0, 0, 0, 20]).await;
}

/// Reproduces a past break: the same, a byte into the `Welcome`.
#[tokio::test]
async fn a_server_reset_a_byte_into_its_welcome_is_not_said_to_be_no_lock_server() {
    // The length of a 20-byte frame and the tag of `Welcome::Rejected`.
    reset_after(&[0, 0, 0, 20, 1]).await;
}

/// The reference: nothing, then a reset.
#[tokio::test]
async fn a_server_reset_with_nothing_sent_is_a_failed_handshake() {
    reset_after(&[]).await;
}

/// Checks why a locker with a 300 ms connect timeout is offline whose
/// server stalls after `answer`.
async fn stalled_after(answer: &'static [u8]) {
    let addr = stand_in(answer, Then::Stall).await;
    let why = why_offline(&addr, Duration::from_millis(300)).await;
    assert!(
        why.contains("began to answer the handshake but did not finish within 300ms"),
        "a lock server stalled in its Welcome: {why}"
    );
    assert!(!why.contains("not a lock server"), "{why}");
}

/// Reproduces a past break: a lock server that stalls after the 4-byte length of its `Welcome` is reported as not answering the handshake, "or it is not a lock server", instead of as having begun to answer and not finished.
///
/// The handshake looked for the start of a frame in what the codec had
/// read, but the length-delimited codec takes a frame's 4-byte length out
/// of its buffer as soon as it has arrived: what is left is the payload
/// read so far, or nothing.
#[tokio::test]
async fn a_server_stalled_after_the_length_of_its_welcome_began_to_answer() {
    // The length of a 20-byte frame, then nothing.
    stalled_after(&[0, 0, 0, 20]).await;
}

/// Reproduces a past break: a lock server stopped a byte into a `Rejected` read as "bytes that are not the lock protocol (01): it is not a lock server".
#[tokio::test]
async fn a_server_stalled_a_byte_into_its_rejection_began_to_answer() {
    // The length of a 20-byte frame and the tag of `Welcome::Rejected`.
    stalled_after(&[0, 0, 0, 20, 1]).await;
}

/// The reference: three bytes of the length, which the codec keeps.
#[tokio::test]
async fn a_server_stalled_inside_the_length_of_its_welcome_began_to_answer() {
    stalled_after(&[0, 0, 0]).await;
}

/// Reproduces a past break: a lock server whose stream ends a byte into its `Welcome` was named as no lock protocol.
///
/// The codec's "bytes remaining on stream" left the payload's first byte
/// alone in its buffer, named as no lock protocol, where a cut after the
/// length alone reads as a close.
#[tokio::test]
async fn a_server_cut_off_a_byte_into_its_welcome_closed_in_the_handshake() {
    // The length of a 20-byte frame and the tag of `Welcome::Rejected`,
    // then the end of the stream.
    let addr = stand_in(&[0, 0, 0, 20, 1], Then::Cut).await;
    let why = why_offline(&addr, Duration::from_millis(300)).await;
    assert!(
        why.contains("the server closed the connection during the handshake"),
        "a lock server cut off in its Welcome: {why}"
    );
    assert!(!why.contains("not a lock server"), "{why}");
}
