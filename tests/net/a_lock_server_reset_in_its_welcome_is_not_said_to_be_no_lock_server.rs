//! Reproduces a past break: a lock server whose connection is reset after it sent the first bytes of its `Welcome` is reported as "not a lock server" instead of as a server that reset the connection during the handshake.
//!
//! `Connection::handshake` judges a failed read from the recording of what
//! came: a stream that ended with nothing, or with the start of a frame of
//! ours, is "the server closed the connection during the handshake"; a
//! reset with nothing read is "handshake failed: ... reset ..."; both are
//! what `quorum-lock status` and `locks` give a grace of 2 s (a server that
//! "closed or reset the connection during the handshake", docs/cli.md).
//! But a reset after the length of the `Welcome` (a server killed as it
//! wrote, a proxy or a full server cutting the connection with unread
//! bytes) is only "ended" when the error is an `UnexpectedEof`: the
//! `ConnectionReset` falls through to the sniffer, which names the 4 bytes
//! of our own frame's length as "bytes that are not the lock protocol
//! (00 00 00 14 ...): it is not a lock server ... (is this the port of a
//! lock server?)", sending the operator after the wrong port, and the
//! command line's grace is not given.
//!
//! A stand-in on 127.0.0.1 reads the client's `Hello`, writes the first
//! bytes of a `Welcome` frame, and resets the connection (SO_LINGER 0).
//! Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::NetLocker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Reads the client's `Hello`, one length-delimited frame.
async fn read_hello(peer: &mut tokio::net::TcpStream) -> bool {
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
/// resets the connection.
async fn resetting(answer: &'static [u8]) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    tokio::spawn(async move {
        for _ in 0..20 {
            let Ok((mut peer, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(10), async move {
                    if !read_hello(&mut peer).await {
                        return;
                    }
                    if peer.write_all(answer).await.is_err() {
                        return;
                    }
                    let _ = peer.flush().await;
                    // A close with linger 0 sends a reset.
                    let _ = peer.set_zero_linger();
                    drop(peer);
                })
                .await;
            });
        }
    });
    addr
}

async fn why_offline(addr: &str) -> String {
    let mut config = RemoteConfig::new("client-secret");
    config.connect_timeout = Duration::from_secs(2);
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

fn assert_cut(why: &str) {
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

#[tokio::test]
async fn a_server_reset_after_the_length_of_its_welcome_is_not_said_to_be_no_lock_server() {
    // The length of a 20-byte frame, then a reset.
    let addr = resetting(&[0, 0, 0, 20]).await;
    assert_cut(&why_offline(&addr).await);
}

#[tokio::test]
async fn a_server_reset_a_byte_into_its_welcome_is_not_said_to_be_no_lock_server() {
    // The length of a 20-byte frame and the tag of `Welcome::Rejected`.
    let addr = resetting(&[0, 0, 0, 20, 1]).await;
    assert_cut(&why_offline(&addr).await);
}

#[tokio::test]
async fn a_server_reset_with_nothing_sent_is_a_failed_handshake() {
    // The reference: nothing, then a reset.
    let addr = resetting(&[]).await;
    assert_cut(&why_offline(&addr).await);
}
