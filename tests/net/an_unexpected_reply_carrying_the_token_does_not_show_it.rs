//! Reproduces a past break: a server that welcomed the client and then answers a lock call with a reply of the wrong kind carrying the client's token (a push whose uid is the token) has the token shown whole in the error `lock` returns.
//!
//! A reply that is not the answer the call expected is reported as
//! "unexpected reply {reply:?}": the `Debug` form escapes the server's
//! words but cuts nothing of them, so a hostile server (or, without TLS,
//! anyone answering in its place) puts the token it was sent in the error
//! every caller logs, whatever is done to the words of its error replies
//! and rejections. The second test here gives a token with a `"` or a
//! `\` in every run of 8 bytes: masking after `Debug` wrote `\"` and `\\`
//! found no run of it, and the error showed it behind the backslashes.
//!
//! A stand-in on 127.0.0.1 reads the `Hello`, welcomes it, and answers the
//! first request with `Push { uid: <token>, event: Granted }` under the
//! request's id. Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::NetLocker;
use tokio::io::AsyncWriteExt;

use crate::{stand_in, wire};

/// A token of 32 bytes, as `openssl rand -hex 16` gives.
const SECRET: &str = "4be1d9a07c3f52e86a1b0d9c7e2f4a53";

/// A token of 32 bytes with a `"` or a `\` in every run of 8.
const QUOTED: &str = r#"4be1d"a07c3\52e86"1b0d9\7e2f4"53"#;

/// What the error of a lock call shows when the server answers it with a
/// push whose uid is `token`, the client's token.
async fn error_shown(token: &'static str) -> String {
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
        reply.push(wire::REPLY_PUSH);
        reply.extend(wire::string(token.as_bytes()));
        reply.push(wire::GRANTED);
        let _ = stream.write_all(&wire::frame(&reply)).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    let mut config = stand_in::config();
    config.token = token.to_owned();
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
async fn an_unexpected_reply_carrying_the_token_does_not_show_it() {
    let shown = error_shown(SECRET).await;
    for piece in SECRET.as_bytes().windows(6) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        assert!(
            !shown.contains(piece),
            "the error shows the token ({piece} is a piece of it): {shown}"
        );
    }
}

/// Reproduces a past break: a token holding `"` or `\` every few bytes,
/// carried whole in a reply of the wrong kind, was shown whole (behind
/// `Debug`'s backslashes) in the error `lock` returns.
#[tokio::test]
async fn an_unexpected_reply_carrying_a_token_with_quotes_does_not_show_it() {
    let shown = error_shown(QUOTED).await;
    // As a reader takes it: `Debug`'s escapes of `"` and `\` undone.
    let shown = shown.replace(r#"\""#, "\"").replace(r"\\", r"\");
    for piece in QUOTED.as_bytes().windows(8) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        assert!(
            !shown.contains(piece),
            "the error shows the token ({piece} is a piece of it): {shown}"
        );
    }
}
