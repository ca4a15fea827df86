//! Reproduces a past break: a peer that sends back the payload of the client's `Hello` without its 4-byte length is named by its first eight bytes in hex, and six of those are the token's.
//!
//! ab048f0 recognises an echo only when what was read and the `Hello` as
//! sent, length first, are prefixes of one another. Sent back without the
//! length, the answer starts with the version and the token's length
//! (`06 20`), which read as a frame of about 100 MB: a length beyond any
//! frame, judged by its bytes (`sniff`), which are not text, so the first
//! eight are shown in hex: the version, the token's length, then the
//! token's first six bytes, in `connect_error`, every failed call's reason
//! and the warn log.
//!
//! A stand-in on 127.0.0.1 reads the `Hello` frame and writes its payload
//! back, keeping the connection open. Real time (sockets), every wait
//! bounded.
#![cfg(feature = "net")]

use crate::peer_answering_the_hello::shown_of_a_peer_answering;

/// A token of 32 bytes, as `openssl rand -hex 16` gives.
const SECRET: &str = "9f3ac2e1b7d04a6f8e5c1d2b3a4f5e6d";

#[tokio::test]
async fn a_peer_echoing_the_hello_without_its_length_is_not_shown_the_token() {
    // The payload, without the length it came with.
    let shown = shown_of_a_peer_answering(SECRET, |hello| hello.to_vec()).await;
    assert!(
        shown.contains("not the lock protocol") || shown.contains("not a lock server"),
        "the peer is named from its answer: {shown}"
    );
    for pair in SECRET.as_bytes().windows(2) {
        let hex = format!("{:02x} {:02x}", pair[0], pair[1]);
        assert!(
            !shown.contains(&hex),
            "the error shows bytes of the token ({hex} is {:?}): {shown}",
            std::str::from_utf8(pair).unwrap_or("?")
        );
    }
}
