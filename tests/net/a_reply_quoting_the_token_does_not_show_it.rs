//! A server that welcomed the client and then answers a lock call with a
//! reply quoting the client's token (an error quoting it, a reply of the
//! wrong kind carrying it as a push's uid or as a leader's value) never
//! gets the token shown in the error `lock` returns.
//!
//! docs/lock-servers.md, "A hostile or misconfigured server": any run of 8
//! or more bytes of a secret the process handed a locker is shown as `***`
//! in the text a peer sends that the library shows. A hostile server (or,
//! without TLS, anyone answering in its place) could otherwise put the
//! token it was sent in the error every caller logs.
//!
//! Every scene: a stand-in on 127.0.0.1 reads the `Hello`, welcomes it,
//! and answers the first request under its id with the reply the scene
//! writes. Real time (sockets), every wait bounded.
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

/// Reproduces a past break: an error reply to a call after the handshake went through `Reply::into_error`, which only escaped the server's words, so an error quoting the token ("token 4be1... may not lock this name") showed it whole.
#[tokio::test]
async fn an_error_reply_quoting_the_token_does_not_show_it() {
    for kind in [wire::KIND_INVALID_ARGUMENT, 1, wire::KIND_UNAVAILABLE] {
        let shown = error_shown(SECRET, move |reply| {
            reply.push(wire::REPLY_ERROR);
            reply.push(kind);
            reply.extend(wire::string(
                format!("token {SECRET} may not lock this name").as_bytes(),
            ));
        })
        .await;
        assert_no_run(&shown, SECRET, 6, &format!("an error of kind {kind}"));
    }
}

/// Reproduces a past break: a reply of the wrong kind carrying the client's token (a push whose uid is the token) was reported as "unexpected reply {reply:?}", whose `Debug` form escapes the server's words but cuts nothing of them, and showed the token whole.
#[tokio::test]
async fn an_unexpected_reply_carrying_the_token_does_not_show_it() {
    let shown = error_shown(SECRET, push_of(SECRET)).await;
    assert_no_run(&shown, SECRET, 6, "a push whose uid is the token");
}

/// Reproduces a past break: a token holding `"` or `\` every few bytes, carried whole in a reply of the wrong kind, was shown whole (behind `Debug`'s backslashes) in the error `lock` returns: masking after `Debug` found no run of it.
#[tokio::test]
async fn an_unexpected_reply_carrying_a_token_with_quotes_does_not_show_it() {
    let shown = error_shown(QUOTED, push_of(QUOTED)).await;
    // As a reader takes it: `Debug`'s escapes of `"` and `\` undone.
    let shown = shown.replace(r#"\""#, "\"").replace(r"\\", r"\");
    assert_no_run(&shown, QUOTED, 8, "a push whose uid is the token");
}

/// Reproduces a past break: a leader's reply whose value is the client's token was reported with the `Debug` of the value's bytes, decimal numbers (`[52, 98, 101, ...]`) that no run of the remembered token matched, and showed the token byte by byte.
#[tokio::test]
async fn an_unexpected_reply_carrying_the_token_as_a_leaders_value_does_not_show_it() {
    let shown = error_shown(SECRET, |reply| {
        reply.push(wire::REPLY_LEADER);
        // Some proclamation: term 1, seq 1, the token as its value.
        reply.extend([1, 1, 1]);
        reply.extend(wire::string(SECRET.as_bytes()));
    })
    .await;
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

/// A reply `Push { uid: token, event: Granted }`.
fn push_of(token: &'static str) -> impl FnOnce(&mut Vec<u8>) + Send + 'static {
    move |reply| {
        reply.push(wire::REPLY_PUSH);
        reply.extend(wire::string(token.as_bytes()));
        reply.push(wire::GRANTED);
    }
}

/// That no run of `len` bytes of `token` is in `shown`.
fn assert_no_run(shown: &str, token: &str, len: usize, reply: &str) {
    for piece in token.as_bytes().windows(len) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        assert!(
            !shown.contains(piece),
            "after {reply}, the error shows the token ({piece} is a piece of it): {shown}"
        );
    }
}

/// What the error of a lock call with the token `token` shows when the
/// server answers it with the reply `write` adds after the request's id.
async fn error_shown(
    token: &'static str,
    write: impl FnOnce(&mut Vec<u8>) + Send + 'static,
) -> String {
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
        write(&mut reply);
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
    let err = result.expect_err("the reply is an error");
    format!("{err:?} / {err}")
}
