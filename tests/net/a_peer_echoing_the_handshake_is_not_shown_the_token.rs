//! Reproduces a past break: a peer that echoes what it is sent (an echo service, a proxy looped back to itself) is named by the first eight bytes it answered, in hex, and those are the client's own `Hello`: the token's length and its first bytes end up in `connect_error`, in every failed call's reason and in the warn log.
//!
//! The token is a secret: `RemoteConfig`'s `Debug` shows it as
//! `<redacted>`, the command line keeps it out of the commands it runs
//! (docs/cli.md), and the server compares digests so that not even its
//! timing tells a byte of it. `Connection::handshake` names an answer that
//! is a whole frame but no `Welcome` by the bytes as they came
//! (`sniff::answer_from_server(&seen.bytes())`, the first 8 in hex): the
//! 4-byte length, the version, the token's length and then the token.
//!
//! A stand-in on 127.0.0.1 reads the client's `Hello` and sends it back,
//! keeping the connection open. Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use crate::peer_answering_the_hello::shown_of_a_peer_answering;
use crate::wire;

/// A token of 32 bytes, as `openssl rand -hex 16` gives.
const SECRET: &str = "9f3ac2e1b7d04a6f8e5c1d2b3a4f5e6d";

#[tokio::test]
async fn a_peer_echoing_the_handshake_is_not_shown_the_token() {
    // Echoed as it came: its length, then its payload.
    let shown = shown_of_a_peer_answering(SECRET, wire::frame).await;
    assert!(
        shown.contains("not the lock protocol"),
        "the peer is named from its answer: {shown}"
    );
    let bytes = SECRET.as_bytes();
    for pair in bytes.windows(2) {
        let hex = format!("{:02x} {:02x}", pair[0], pair[1]);
        assert!(
            !shown.contains(&hex),
            "the error shows bytes of the token ({hex} is {:?}) and its length: {shown}",
            std::str::from_utf8(pair).unwrap_or("?")
        );
    }
}
