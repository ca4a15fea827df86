//! Reproduces a past break: a lock server that stalls after the 4-byte length of its `Welcome` (and maybe a byte of it) is reported as not answering the handshake, or as answering bytes that are no lock protocol, "not a lock server", instead of as having begun to answer and not finished.
//!
//! `Connection::handshake` means to tell, at the connect timeout, a peer
//! that said nothing (maybe a Redis server) from "a lock server that
//! stalled in the middle of its `Welcome`": "the server began to answer
//! the handshake but did not finish within ...: it is stopped or
//! overloaded". It looks for the start of a frame in what the codec has
//! read. But the length-delimited codec takes a frame's 4-byte length
//! out of its buffer as soon as the length has arrived: what is left is
//! the payload read so far, or nothing. So a lock server stopped (or cut
//! off by the network) after writing the length of its `Welcome` reads
//! as one that never answered, "or it is not a lock server (a Redis
//! server, for one, says nothing to a lock client)"; one stopped a byte
//! into a `Rejected` reads as "bytes that are not the lock protocol (01):
//! it is not a lock server ... (is this the port of a lock server?)",
//! which sends the operator after the wrong port. The same holds when the
//! stream ends there (a lock server killed as it wrote, a proxy cutting
//! it): the codec's "bytes remaining on stream" leaves the payload's first
//! byte alone in the buffer, named as no lock protocol, where a cut after
//! the length alone reads as "the server closed the connection during the
//! handshake".
//!
//! A stand-in on 127.0.0.1 reads the client's `Hello`, writes the first
//! bytes of a `Welcome` frame and keeps the connection open (or ends its
//! side of it). Real time (sockets), every wait bounded.
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
/// ends its side of the stream (`cut`) or not, and keeps reading until the
/// client closes it (at most 10 s).
async fn stalling(answer: &'static [u8]) -> String {
    answering(answer, false).await
}

async fn answering(answer: &'static [u8], cut: bool) -> String {
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
                    if cut && peer.shutdown().await.is_err() {
                        return;
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

async fn why_offline(addr: &str) -> String {
    let mut config = RemoteConfig::new("client-secret");
    config.connect_timeout = Duration::from_millis(300);
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

fn assert_began(why: &str) {
    assert!(
        why.contains("began to answer the handshake but did not finish within 300ms"),
        "a lock server stalled in its Welcome: {why}"
    );
    assert!(!why.contains("not a lock server"), "{why}");
}

#[tokio::test]
async fn a_server_stalled_after_the_length_of_its_welcome_began_to_answer() {
    // The length of a 20-byte frame, then nothing.
    let addr = stalling(&[0, 0, 0, 20]).await;
    assert_began(&why_offline(&addr).await);
}

#[tokio::test]
async fn a_server_stalled_a_byte_into_its_rejection_began_to_answer() {
    // The length of a 20-byte frame and the tag of `Welcome::Rejected`.
    let addr = stalling(&[0, 0, 0, 20, 1]).await;
    assert_began(&why_offline(&addr).await);
}

#[tokio::test]
async fn a_server_stalled_inside_the_length_of_its_welcome_began_to_answer() {
    // The reference: three bytes of the length, which the codec keeps.
    let addr = stalling(&[0, 0, 0]).await;
    assert_began(&why_offline(&addr).await);
}

#[tokio::test]
async fn a_server_cut_off_a_byte_into_its_welcome_closed_in_the_handshake() {
    // The same root: the length of a 20-byte frame and the tag of
    // `Welcome::Rejected`, then the end of the stream. The codec's "bytes
    // remaining" leaves the tag alone in its buffer, named as no lock
    // protocol; the length alone, then the end, reads as a close.
    let addr = answering(&[0, 0, 0, 20, 1], true).await;
    let why = why_offline(&addr).await;
    assert!(
        why.contains("the server closed the connection during the handshake"),
        "a lock server cut off in its Welcome: {why}"
    );
    assert!(!why.contains("not a lock server"), "{why}");
}
