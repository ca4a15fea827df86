//! Reproduces a past break: a peer that answers the client's `Hello` with a well-formed `Rejected` whose reason quotes what it was sent has the token shown in `connect_error`, since only answers that are not the lock protocol are checked for it.
//!
//! Commit 83bd929: "no bytes of the token are ever shown from what a
//! peer sent, wherever a run of six of them ... stands in it". The check
//! (`holds_what_was_sent`) runs only where the answer is named by its
//! bytes (`sniff`); a `Welcome::Rejected` decodes, and its reason is shown
//! as it came, escaped only: "the server turned the connection away:
//! unexpected handshake '\u{6} 9f3ac2e1…'". A proxy or stand-in that
//! speaks the framing and quotes the request it refuses (as the text
//! services the earlier tests stand for do) puts the token in the error,
//! every failed call's reason and the warn log.
//!
//! A stand-in on 127.0.0.1 reads the `Hello` and answers a `Rejected`
//! frame, keeping the connection open. Real time (sockets), every wait
//! bounded.
#![cfg(feature = "net")]

use crate::peer_answering_the_hello::shown_of_a_peer_answering;
use crate::wire;

/// A token of 32 bytes, as `openssl rand -hex 16` gives.
const SECRET: &str = "9f3ac2e1b7d04a6f8e5c1d2b3a4f5e6d";

#[tokio::test]
async fn a_peer_quoting_the_hello_in_a_rejection_is_not_shown_the_token() {
    let shown = shown_of_a_peer_answering(SECRET, |hello| {
        let reason = format!("unexpected handshake '{}'", String::from_utf8_lossy(hello));
        wire::frame(&wire::rejected(&reason))
    })
    .await;
    for piece in SECRET.as_bytes().windows(6) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        assert!(
            !shown.contains(piece),
            "the error shows the token ({piece} is a piece of it): {shown}"
        );
    }
}
