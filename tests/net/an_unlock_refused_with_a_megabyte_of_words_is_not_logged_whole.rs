//! Reproduces a past break: a server that refuses an unlock with an error of a megabyte has it written whole, escaped to five megabytes, into one warn line of the client's log, at every unlock it refuses so.
//!
//! docs/lock-servers.md, "Threat model", a hostile server: it "cannot
//! reach beyond what the library returns ... Nor can it flood the
//! client's log". A `Dsync` whose unlock a locker refuses for good logs
//! `cannot release; the entry stays until the lock server expires it` at
//! warn with the error, and the error carries the server's words whole
//! (escaped: a control character grows to five bytes), however long the
//! frame (up to the 2 MiB frame limit). No throttle applies: every
//! unlock the server refuses so writes such a line, so a hostile server,
//! or without TLS anyone answering in its place, writes megabytes into
//! the log of every application that embeds the client at each release.
//!
//! A stand-in on 127.0.0.1 welcomes the client with a validity of 60 s,
//! grants every request but unlocks, and answers an unlock with an
//! `Error` whose message is 1 MiB of U+0001. A `Dsync` over it takes a
//! lock and releases it. Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::{Dsync, NetLocker};
use tokio::io::AsyncWriteExt;

use crate::log_capture::Capture;
use crate::{stand_in, wire};

/// The refusal's message: 1 MiB of a control character, within the 2 MiB
/// frame limit.
const MESSAGE_LEN: usize = 1 << 20;

/// A generous bound on one log line reporting a server's refusal: far more
/// than any honest reason needs, far less than the message.
const LINE_BOUND: usize = 64 << 10;

#[tokio::test]
async fn an_unlock_refused_with_a_megabyte_of_words_is_not_logged_whole() {
    let (capture, _guard) = Capture::install();
    let (listener, addr) = stand_in::bind().await;
    let peer = tokio::spawn(async move {
        while let Some(mut stream) = stand_in::accept_hello(&listener).await {
            let welcome = wire::frame(&wire::accepted(wire::VERSION_6, Duration::from_secs(60)));
            if stream.write_all(&welcome).await.is_err() {
                continue;
            }
            tokio::spawn(async move {
                while let Ok(request) = wire::read_frame(&mut stream, 1 << 20).await {
                    let (id, rest) = wire::response(&request);
                    let reply = if rest.first() == Some(&wire::OP_UNLOCK) {
                        let mut error = wire::varint(id);
                        error.push(wire::REPLY_ERROR);
                        error.push(wire::KIND_INVALID_ARGUMENT);
                        error.extend(wire::string(&vec![0x01; MESSAGE_LEN]));
                        error
                    } else {
                        let mut granted = wire::varint(id);
                        granted.extend([wire::REPLY_BOOL, 1]);
                        granted
                    };
                    if stream.write_all(&wire::frame(&reply)).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let remote = tokio::time::timeout(
        Duration::from_secs(10),
        RemoteLocker::connect(addr, stand_in::config()),
    )
    .await
    .expect("connect ends within its timeout")
    .expect("the stand-in welcomes the client");
    let ds = Dsync::builder(vec![Arc::new(remote) as Arc<dyn NetLocker>])
        .owner("holder")
        .build()
        .expect("a Dsync over the stand-in");
    let mutex = ds.rw_mutex(["long-refusal"]).expect("a valid name");
    let guard = tokio::time::timeout(Duration::from_secs(10), mutex.try_lock())
        .await
        .expect("the lock call ends in time")
        .expect("the stand-in grants the lock");
    let _ = tokio::time::timeout(Duration::from_secs(10), guard.unlock()).await;
    for _ in 0..500 {
        if !capture.containing("cannot release").is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    peer.abort();
    let reported = capture.containing("cannot release");
    assert!(
        !reported.is_empty(),
        "the refused unlock was not logged at all: {:?}",
        capture
            .lines()
            .iter()
            .map(|l| l.chars().take(200).collect::<String>())
            .collect::<Vec<_>>()
    );
    for line in reported {
        assert!(
            line.len() <= LINE_BOUND,
            "one warn line quotes the server's refusal whole: {} bytes (from a message of {} \
             bytes); it begins: {}",
            line.len(),
            MESSAGE_LEN,
            line.chars().take(200).collect::<String>()
        );
    }
}
