//! Reproduces a past break: a server that sends an error to no request with a message of a megabyte has it written whole, escaped to five megabytes, into one line of the client's warn log, once a second for as long as it likes.
//!
//! docs/lock-servers.md, "Threat model", a hostile server: "Nor can it
//! flood the client's log: error replies sent to no request, frames that
//! are no response and the reconnects they cause are logged at most once a
//! second per server". The throttle counts lines, not bytes: the client
//! logs such an error's words whole (escaped, so a control character grows
//! to five bytes), however long the frame that carried them (up to the 2
//! MiB frame limit), so a hostile server, or without TLS anyone answering
//! in its place, writes some 10 MB a second into the log of every
//! application that embeds the client: about 36 GB an hour per server,
//! one line at a time.
//!
//! A stand-in on 127.0.0.1 reads the `Hello`, welcomes it, and sends one
//! unsolicited `Error` whose message is 1 MiB of U+0001, then a push for a
//! sentinel uid (logged at trace once read). The line that reports the
//! error should quote a bounded part of it. Real time (sockets), every
//! wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use tokio::io::AsyncWriteExt;

use crate::log_capture::Capture;
use crate::{stand_in, wire};

/// The uid of the push after the error: once it is logged, the error was read.
const SENTINEL: &str = "after-the-long-error-sentinel";

/// The error's message: 1 MiB of a control character, within the 2 MiB
/// frame limit.
const MESSAGE_LEN: usize = 1 << 20;

/// A generous bound on one log line reporting a server's error: far more
/// than any honest reason needs, far less than the message.
const LINE_BOUND: usize = 64 << 10;

#[tokio::test]
async fn an_unsolicited_error_of_a_megabyte_is_not_logged_whole() {
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
        error.extend(wire::string(&vec![0x01; MESSAGE_LEN]));
        out.extend(wire::frame(&error));
        let mut push = wire::varint(0);
        push.push(wire::REPLY_PUSH);
        push.extend(wire::string(SENTINEL.as_bytes()));
        push.push(wire::GRANTED);
        out.extend(wire::frame(&push));
        let _ = stream.write_all(&out).await;
        tokio::time::sleep(Duration::from_secs(20)).await;
    });
    let locker = tokio::time::timeout(
        Duration::from_secs(10),
        RemoteLocker::connect(addr, stand_in::config()),
    )
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
    assert!(
        !capture.containing(SENTINEL).is_empty(),
        "the client read the error and the push after it"
    );
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
