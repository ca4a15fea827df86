//! Reproduces a past break: a server that welcomed the client and then sends an error to no request, quoting the client's token, has the token written whole into the client's warn log.
//!
//! The client logs a reply to no request at warn with the reply's `Debug`
//! form: that escapes the server's words, but cuts nothing of them, so a
//! hostile server (or, without TLS, anyone answering in its place) writes
//! the token it was sent into the log of every application that embeds
//! the client, where the commit that cut a `Rejected` reason quoting the
//! token (cf6ee8e) does not reach.
//!
//! A stand-in on 127.0.0.1 reads the `Hello`, welcomes it, and sends one
//! unsolicited `Error` quoting the token, then a push for a sentinel uid
//! (logged at trace once read). Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use tokio::io::AsyncWriteExt;

use crate::log_capture::Capture;
use crate::{stand_in, wire};

/// A token of 32 bytes, as `openssl rand -hex 16` gives.
const SECRET: &str = "4be1d9a07c3f52e86a1b0d9c7e2f4a53";

/// The uid of the push after the error: once it is logged, the error was read.
const SENTINEL: &str = "after-the-error-sentinel";

#[tokio::test]
async fn an_unsolicited_error_quoting_the_token_is_not_logged_with_it() {
    let (capture, _guard) = Capture::install();
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
        let mut out = Vec::new();
        let mut error = wire::varint(0);
        error.push(wire::REPLY_ERROR);
        error.push(wire::KIND_INVALID_ARGUMENT);
        error.extend(wire::string(
            format!("connection with token {SECRET} is being watched").as_bytes(),
        ));
        out.extend(wire::frame(&error));
        let mut push = wire::varint(0);
        push.push(wire::REPLY_PUSH);
        push.extend(wire::string(SENTINEL.as_bytes()));
        push.push(wire::GRANTED);
        out.extend(wire::frame(&push));
        let _ = stream.write_all(&out).await;
        tokio::time::sleep(Duration::from_secs(10)).await;
    });
    let mut config = stand_in::config();
    config.token = SECRET.to_owned();
    let locker = tokio::time::timeout(Duration::from_secs(10), RemoteLocker::connect(addr, config))
        .await
        .expect("connect ends within its timeout")
        .expect("the stand-in welcomes the client");
    for _ in 0..500 {
        if !capture.containing(SENTINEL).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    peer.abort();
    drop(locker);
    assert!(
        !capture.containing(SENTINEL).is_empty(),
        "the client read the error and the push after it"
    );
    for line in capture.lines() {
        for piece in SECRET.as_bytes().windows(6) {
            let piece = std::str::from_utf8(piece).expect("ascii");
            assert!(
                !line.contains(piece),
                "the log shows the token ({piece} is a piece of it): {line}"
            );
        }
    }
}
