//! Reproduces a past break: a connection the server cuts off after the 4-byte length of a frame is judged an end in good order (an idle close), so the locker does not reconnect in the background, as it does for a connection that broke.
//!
//! The reader of an authenticated connection tells an end in good order
//! (the server closed between frames: an idle close, mended by the next
//! call) from a broken stream (`Ended::Broken`: "a reset, a stream cut in
//! the middle of a frame"), which the locker "re-establishes in the
//! background" (docs/lock-servers.md). It asks the length-delimited codec:
//! a stream that ends with nothing in the codec's buffer is an end between
//! frames. But the codec takes a frame's length out of its buffer as soon
//! as the length has arrived (the root of 2b905e9 in the handshake), and
//! then reports the stream's end as a clean `None`; over TLS the
//! `UnexpectedEof` is read the same way. So a server killed (or cut off by
//! the network) after writing the length of a frame reads as one that
//! closed an idle connection: no reconnect follows until a call, and a
//! call waiting there is told "a later call connects again".
//!
//! A stand-in on 127.0.0.1 accepts the handshake and at once writes the
//! length of a 20-byte frame, then ends its side (`FIN`), or, for the
//! reference, resets the connection. Each later connection is accepted and
//! held. The test waits (at most 3 s) for the locker to connect again with
//! no call made. Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::wire::{accepted, frame, VERSION_5};
use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::RetryPolicy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

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

/// A stand-in whose first connection is welcomed and then cut after the
/// length of a frame (with a reset when `reset`); every later one is
/// welcomed and held. Each accepted connection is reported on the channel.
async fn cutting(tail: &'static [u8], reset: bool) -> (String, mpsc::UnboundedReceiver<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        for n in 0..10usize {
            let Ok((mut peer, _)) = listener.accept().await else {
                return;
            };
            let _ = tx.send(n);
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(10), async move {
                    if !read_hello(&mut peer).await {
                        return;
                    }
                    let mut out = frame(&accepted(VERSION_5, Duration::from_secs(30)));
                    if n == 0 {
                        // The start of a 20-byte frame, and no more.
                        out.extend_from_slice(tail);
                    }
                    if peer.write_all(&out).await.is_err() {
                        return;
                    }
                    if n == 0 {
                        if reset {
                            let _ = peer.set_zero_linger();
                            drop(peer);
                            return;
                        }
                        if peer.shutdown().await.is_err() {
                            return;
                        }
                    }
                    let mut buf = [0u8; 512];
                    while peer.read(&mut buf).await.unwrap_or(0) > 0 {}
                })
                .await;
            });
        }
    });
    (addr, rx)
}

/// Whether the locker connects again, with no call, within 3 s of the cut.
async fn reconnects_in_the_background(tail: &'static [u8], reset: bool) -> bool {
    let (addr, mut accepted) = cutting(tail, reset).await;
    let mut config = RemoteConfig::new("client-secret");
    config.connect_timeout = Duration::from_secs(2);
    config.reconnect = RetryPolicy {
        initial: Duration::from_millis(20),
        max: Duration::from_millis(100),
    };
    let locker = tokio::time::timeout(Duration::from_secs(10), RemoteLocker::connect(addr, config))
        .await
        .expect("connect ends within its timeout")
        .expect("a locker");
    let first = tokio::time::timeout(Duration::from_secs(3), accepted.recv()).await;
    assert_eq!(first.ok().flatten(), Some(0), "the first connection");
    let again = tokio::time::timeout(Duration::from_secs(3), accepted.recv()).await;
    drop(locker);
    again.ok().flatten() == Some(1)
}

#[tokio::test]
async fn a_connection_cut_after_the_length_of_a_frame_is_reconnected_in_the_background() {
    assert!(
        reconnects_in_the_background(&[0, 0, 0, 20], false).await,
        "a server cut off after the length of a frame was read as an idle close: no \
         reconnect in the background within 3 s"
    );
}

#[tokio::test]
async fn a_connection_reset_after_the_length_of_a_frame_is_reconnected_in_the_background() {
    // The reference: the same cut, by a reset.
    assert!(reconnects_in_the_background(&[0, 0, 0, 20], true).await);
}

#[tokio::test]
async fn a_connection_cut_a_byte_into_a_frame_is_reconnected_in_the_background() {
    // The reference: the same cut a byte later, which the codec keeps.
    assert!(reconnects_in_the_background(&[0, 0, 0, 20, 1], false).await);
}
