//! Reproduces a past break: a token holding `"` or `\` every few bytes, carried whole in a reply of the wrong kind, is shown whole (behind `Debug`'s backslashes) in the error `lock` returns.
//!
//! docs/lock-servers.md, "Threat model": in every piece of peer text the
//! library shows (a reply of the wrong kind among them) "any run of 8 or
//! more bytes of a secret the process handed a locker ... is shown as
//! `***`". A reply that is not the answer the call expected is reported
//! as "unexpected reply {reply:?}", masked after `Debug` wrote it: `Debug`
//! writes `"` as `\"` and `\` as `\\`, so a token with one of those
//! characters in every run of 8 bytes has no run left to find, and the
//! error shows it to anyone who reads past the backslashes. Tokens are any
//! text; a password-style token with quotes and backslashes is one.
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

/// A token of 32 bytes with a `"` or a `\\` in every run of 8.
const SECRET: &str = r#"4be1d"a07c3\52e86"1b0d9\7e2f4"53"#;

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
        reply.push(wire::REPLY_PUSH);
        reply.extend(wire::string(SECRET.as_bytes()));
        reply.push(wire::GRANTED);
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
async fn an_unexpected_reply_carrying_a_token_with_quotes_does_not_show_it() {
    let shown = error_shown().await;
    // As a reader takes it: `Debug`'s escapes of `"` and `\\` undone.
    let shown = shown.replace(r#"\""#, "\"").replace(r"\\", r"\");
    for piece in SECRET.as_bytes().windows(8) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        assert!(
            !shown.contains(piece),
            "the error shows the token ({piece} is a piece of it): {shown}"
        );
    }
}
