//! Reproduces a past break: a peer that answers the handshake with a whole frame that is no `Welcome` (here an empty one, the four bytes `00 00 00 00`) is named by the frame's body rather than by the bytes it sent, so `connect_error` says it "answered bytes that are not the lock protocol ()": no bytes at all.
//!
//! docs/lock-servers.md: `connect_error()` says "the peer answered in the
//! Redis protocol, HTTP or other text (quoted) or bytes (in hex), so it is
//! no lock server"; docs/cli.md (the table of reasons): "the first line
//! quoted, or the first bytes in hex". `Connection::handshake` names an
//! answer that failed the length check from what was read (`Seen`, the
//! length prefix included), but an answer that came as a whole frame and
//! did not decode as a `Welcome` from the frame's body alone
//! (`sniff::answer_from_server(&frame)`): the length prefix is gone, and an
//! empty frame leaves nothing to show.
//!
//! A stand-in on 127.0.0.1 reads the client's `Hello`, answers the four
//! bytes `00 00 00 00` and keeps the connection open; the locker is named
//! from that answer at once. Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use crate::peer_answering_the_hello::shown_of_a_peer_answering;
use crate::stand_in;

#[tokio::test]
async fn a_peer_answering_an_empty_frame_is_named_by_the_bytes_it_sent() {
    let reason =
        shown_of_a_peer_answering(&stand_in::config().token, |_hello| vec![0, 0, 0, 0]).await;
    assert!(
        reason.starts_with("Some(LockerUnavailable"),
        "expected the peer named from its answer, got {reason}"
    );
    assert!(
        reason.contains("not the lock protocol"),
        "the peer is named from its answer: {reason}"
    );
    assert!(
        reason.contains("00 00 00 00"),
        "a peer that answered the bytes 00 00 00 00 is named by other bytes, or none (the \
         docs promise the first bytes in hex): {reason}"
    );
}
