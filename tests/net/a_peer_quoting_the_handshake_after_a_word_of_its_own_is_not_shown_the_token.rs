//! Reproduces a past break: a peer that answers the client's `Hello` by quoting it after words of its own ("ERR unknown command '<what it got>'") is named by its first line, quoted, and that line holds the token: the echo check only matches our own bytes at the very start of the answer.
//!
//! ab048f0 names a peer that sends back the client's `Hello` as an echo,
//! never by its bytes, since they hold the token. It only recognises an
//! echo that starts at the answer's first byte (`sent.starts_with(read)`
//! or the reverse). A peer whose answer starts with a few printable words
//! and then repeats what it was sent (a text service quoting an unknown
//! command, a console that prints a prompt and echoes its input) takes the
//! `sniff` text path instead: the first 40 bytes of its first line are
//! quoted, escaped byte by byte, and the token is printable, so it shows as
//! it is in `connect_error`, in every failed call's reason and in the warn
//! log.
//!
//! A stand-in on 127.0.0.1 reads the `Hello` and answers it in one write,
//! keeping the connection open. Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::NetLocker;
use tokio::io::AsyncWriteExt;

use crate::{stand_in, wire};

/// A token of 32 bytes, as `openssl rand -hex 16` gives.
const SECRET: &str = "9f3ac2e1b7d04a6f8e5c1d2b3a4f5e6d";

#[tokio::test]
async fn a_peer_quoting_the_handshake_after_a_word_of_its_own_is_not_shown_the_token() {
    let (listener, addr) = stand_in::bind().await;
    let peer = tokio::spawn(async move {
        let mut held = Vec::new();
        for _ in 0..5 {
            let Ok(Ok((mut stream, _))) =
                tokio::time::timeout(Duration::from_secs(10), listener.accept()).await
            else {
                return;
            };
            let Ok(Ok(hello)) =
                tokio::time::timeout(Duration::from_secs(5), wire::read_frame(&mut stream, 4096))
                    .await
            else {
                return;
            };
            // What it got, quoted after a word of its own, in one write.
            let mut answer = b"ERR unknown command '".to_vec();
            answer.extend_from_slice(&wire::frame(&hello));
            answer.extend_from_slice(b"'\r\n");
            let _ = stream.write_all(&answer).await;
            held.push(stream);
        }
    });
    let mut config = stand_in::config();
    config.token = SECRET.to_owned();
    config.connect_timeout = Duration::from_secs(2);
    let locker = tokio::time::timeout(Duration::from_secs(10), RemoteLocker::connect(addr, config))
        .await
        .expect("connect ends within its timeout")
        .expect("an offline locker, not an error");
    assert!(!locker.is_online(), "the peer answered no Welcome");
    let shown = format!("{:?} / {}", locker.connect_error(), {
        match locker.connect_error() {
            Some(err) => err.to_string(),
            None => String::new(),
        }
    });
    drop(locker);
    peer.abort();
    assert!(
        shown.contains("not the lock protocol") || shown.contains("not a lock server"),
        "the peer is named from its answer: {shown}"
    );
    for piece in SECRET.as_bytes().windows(6) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        assert!(
            !shown.contains(piece),
            "the error shows the token ({piece} is a piece of it): {shown}"
        );
    }
}
