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

use crate::peer_answering_the_hello::shown_of_a_peer_answering;
use crate::wire;

/// A token of 32 bytes, as `openssl rand -hex 16` gives.
const SECRET: &str = "9f3ac2e1b7d04a6f8e5c1d2b3a4f5e6d";

#[tokio::test]
async fn a_peer_quoting_the_handshake_after_a_word_of_its_own_is_not_shown_the_token() {
    // What it got, quoted after a word of its own, in one write.
    let shown = shown_of_a_peer_answering(SECRET, |hello| {
        let mut answer = b"ERR unknown command '".to_vec();
        answer.extend_from_slice(&wire::frame(hello));
        answer.extend_from_slice(b"'\r\n");
        answer
    })
    .await;
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
