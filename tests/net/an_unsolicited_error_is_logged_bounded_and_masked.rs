//! What a server sends to no request (an `Error` reply after the welcome)
//! reaches the client's log bounded and masked: a hostile server, or
//! without TLS anyone answering in its place, cannot write megabytes into
//! it, nor make it show the token the client sent.
//!
//! Each scene: a stand-in on 127.0.0.1 reads the `Hello`, welcomes it, and
//! sends one unsolicited `Error` with the scene's message, then a push for
//! a sentinel uid (logged at trace once read). Real time (sockets), every
//! wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use tokio::io::AsyncWriteExt;

use crate::log_capture::Capture;
use crate::{stand_in, wire};

/// Reproduces a past break: a server that sends an error to no request with a message of a megabyte has it written whole, escaped to five megabytes, into one line of the client's warn log, once a second for as long as it likes.
///
/// docs/lock-servers.md, "Threat model", a hostile server: "Nor can it
/// flood the client's log: error replies sent to no request, frames that
/// are no response and the reconnects they cause are logged at most once a
/// second per server". The throttle counts lines, not bytes: the client
/// logs such an error's words whole (escaped, so a control character grows
/// to five bytes), however long the frame that carried them (up to the 2
/// MiB frame limit), so a hostile server, or without TLS anyone answering
/// in its place, writes some 10 MB a second into the log of every
/// application that embeds the client: about 36 GB an hour per server,
/// one line at a time.
///
/// A stand-in on 127.0.0.1 reads the `Hello`, welcomes it, and sends one
/// unsolicited `Error` whose message is 1 MiB of U+0001, then a push for a
/// sentinel uid (logged at trace once read). The line that reports the
/// error should quote a bounded part of it. Real time (sockets), every
/// wait bounded.
#[tokio::test]
async fn an_unsolicited_error_of_a_megabyte_is_not_logged_whole() {
    // 1 MiB of a control character, within the 2 MiB frame limit.
    const MESSAGE_LEN: usize = 1 << 20;
    // A generous bound on one log line reporting a server's error: far
    // more than any honest reason needs, far less than the message.
    const LINE_BOUND: usize = 64 << 10;
    let capture = logged_after_an_unsolicited_error(&[0x01; MESSAGE_LEN], None).await;
    let reported = capture.containing("to no request");
    assert!(
        !reported.is_empty(),
        "the error to no request was not logged at all: {} lines",
        capture.lines().len()
    );
    for line in reported {
        assert!(
            line.len() <= LINE_BOUND,
            "one warn line quotes the server's error whole: {} bytes (from a message of {} \
             bytes), once a second per server; it begins: {}",
            line.len(),
            MESSAGE_LEN,
            line.chars().take(200).collect::<String>()
        );
    }
}

/// Reproduces a past break: a server that welcomed the client and then sends an error to no request, quoting the client's token, has the token written whole into the client's warn log.
///
/// The client logs a reply to no request at warn with the reply's `Debug`
/// form: that escapes the server's words, but cuts nothing of them, so a
/// hostile server (or, without TLS, anyone answering in its place) writes
/// the token it was sent into the log of every application that embeds
/// the client, where the commit that cut a `Rejected` reason quoting the
/// token (cf6ee8e) does not reach.
///
/// A stand-in on 127.0.0.1 reads the `Hello`, welcomes it, and sends one
/// unsolicited `Error` quoting the token, then a push for a sentinel uid
/// (logged at trace once read). Real time (sockets), every wait bounded.
#[tokio::test]
async fn an_unsolicited_error_quoting_the_token_is_not_logged_with_it() {
    // A token of 32 bytes, as `openssl rand -hex 16` gives.
    const SECRET: &str = "4be1d9a07c3f52e86a1b0d9c7e2f4a53";
    let message = format!("connection with token {SECRET} is being watched");
    let capture = logged_after_an_unsolicited_error(message.as_bytes(), Some(SECRET)).await;
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

/// The uid of the push after the error: once it is logged, the error was read.
const SENTINEL: &str = "after-the-error-sentinel";

/// What the client logs once it has read an unsolicited `Error` of
/// `message` and the push after it, connected with `token` (the stand-in's
/// default without).
async fn logged_after_an_unsolicited_error(message: &[u8], token: Option<&str>) -> Capture {
    let (capture, guard) = Capture::install();
    let (listener, addr) = stand_in::bind().await;
    let message = message.to_vec();
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
        error.extend(wire::string(&message));
        out.extend(wire::frame(&error));
        let mut push = wire::varint(0);
        push.push(wire::REPLY_PUSH);
        push.extend(wire::string(SENTINEL.as_bytes()));
        push.push(wire::GRANTED);
        out.extend(wire::frame(&push));
        let _ = stream.write_all(&out).await;
        tokio::time::sleep(Duration::from_secs(20)).await;
    });
    let mut config = stand_in::config();
    if let Some(token) = token {
        config.token = token.to_owned();
    }
    let locker = tokio::time::timeout(Duration::from_secs(10), RemoteLocker::connect(addr, config))
        .await
        .expect("connect ends within its timeout")
        .expect("the stand-in welcomes the client");
    for _ in 0..1500 {
        if !capture.containing(SENTINEL).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    peer.abort();
    drop(locker);
    drop(guard);
    assert!(
        !capture.containing(SENTINEL).is_empty(),
        "the client read the error and the push after it"
    );
    capture
}
