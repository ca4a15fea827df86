//! Reproduces a past break: a server that welcomed the client and then answers a lock call with a leader's reply whose value is the client's token has the token shown, byte by byte in decimal, in the error `lock` returns.
//!
//! docs/lock-servers.md, "A hostile or misconfigured server": any run of 8
//! or more bytes of a secret the process handed a locker is shown as `***`
//! in the text a peer sends that the library shows. A reply of the wrong
//! kind is reported as "unexpected reply {reply:?}", masked by
//! `escape_peer_text`; but the `Debug` of a leader's value (bytes) lists
//! them as decimal numbers (`[52, 98, 101, ...]`), which no run of the
//! remembered token matches. A hostile server (or, without TLS, anyone
//! answering in its place) puts the token it was sent in the error every
//! caller logs, readable by decoding the list.
//!
//! A stand-in on 127.0.0.1 reads the `Hello`, welcomes it, and answers the
//! first request with `Leader(Some { term: 1, seq: 1, value: <token> })`
//! under the request's id. Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::NetLocker;
use tokio::io::AsyncWriteExt;

use crate::{stand_in, wire};

/// A token of 32 bytes, as `openssl rand -hex 16` gives.
const SECRET: &str = "4be1d9a07c3f52e86a1b0d9c7e2f4a53";

async fn error_shown() -> String {
    let (listener, addr) = stand_in::bind().await;
    let peer = tokio::spawn(async move {
        let Ok(Some(mut stream)) =
            tokio::time::timeout(Duration::from_secs(10), stand_in::accept_hello(&listener)).await
        else {
            return;
        };
        if !stand_in::welcome(&mut stream).await {
            return;
        }
        let Ok(Ok(request)) = tokio::time::timeout(
            Duration::from_secs(5),
            wire::read_frame(&mut stream, 1 << 20),
        )
        .await
        else {
            return;
        };
        let (id, _) = wire::response(&request);
        let mut reply = wire::varint(id);
        reply.push(wire::REPLY_LEADER);
        // Some proclamation: term 1, seq 1, the token as its value.
        reply.extend([1, 1, 1]);
        reply.extend(wire::string(SECRET.as_bytes()));
        let _ = stream.write_all(&wire::frame(&reply)).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    let mut config = stand_in::config();
    config.token = SECRET.to_owned();
    let locker = tokio::time::timeout(Duration::from_secs(10), RemoteLocker::connect(addr, config))
        .await
        .expect("connect ends within its timeout")
        .expect("the stand-in welcomes the client");
    let result = tokio::time::timeout(Duration::from_secs(10), locker.lock(&stand_in::args("u1")))
        .await
        .expect("the call ends within its timeout");
    peer.abort();
    let err = result.expect_err("a reply of the wrong kind is an error");
    format!("{err:?} / {err}")
}

#[tokio::test]
async fn an_unexpected_reply_carrying_the_token_as_a_leaders_value_does_not_show_it() {
    let shown = error_shown().await;
    assert!(
        shown.contains("unexpected reply"),
        "not the unexpected reply's error: {shown}"
    );
    // The token's bytes as `Debug` of a byte slice lists them.
    for piece in SECRET.as_bytes().windows(8) {
        let decimal = piece
            .iter()
            .map(u8::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        assert!(
            !shown.contains(&decimal),
            "the error shows the token as decimal bytes ({decimal} is a piece of it): {shown}"
        );
    }
}
