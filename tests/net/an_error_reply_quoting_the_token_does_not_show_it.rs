//! Reproduces a past break: a server that welcomed the client and then answers a lock call with an error quoting the client's token has the token shown whole in the error `lock` returns.
//!
//! Commit cf6ee8e cut a `Welcome::Rejected` reason where it quotes the
//! token, but an error reply to a call after the handshake goes through
//! `Reply::into_error`, which only escapes the server's words: a hostile
//! server (or, without TLS, anyone answering in its place) that quotes the
//! token it was sent ("token 4be1... may not lock this name") puts the
//! client's own token in the error every caller logs.
//!
//! A stand-in on 127.0.0.1 reads the `Hello`, welcomes it, and answers the
//! first request with an `Error` quoting the token, once as each kind.
//! Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::NetLocker;
use tokio::io::AsyncWriteExt;

use crate::{stand_in, wire};

/// A token of 32 bytes, as `openssl rand -hex 16` gives.
const SECRET: &str = "4be1d9a07c3f52e86a1b0d9c7e2f4a53";

async fn error_shown_for(kind: u8) -> String {
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
        reply.push(wire::REPLY_ERROR);
        reply.push(kind);
        reply.extend(wire::string(
            format!("token {SECRET} may not lock this name").as_bytes(),
        ));
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
    let err = result.expect_err("an error reply is an error");
    format!("{err:?} / {err}")
}

#[tokio::test]
async fn an_error_reply_quoting_the_token_does_not_show_it() {
    for kind in [wire::KIND_INVALID_ARGUMENT, 1, wire::KIND_UNAVAILABLE] {
        let shown = error_shown_for(kind).await;
        for piece in SECRET.as_bytes().windows(6) {
            let piece = std::str::from_utf8(piece).expect("ascii");
            assert!(
                !shown.contains(piece),
                "the error (kind {kind}) shows the token ({piece} is a piece of it): {shown}"
            );
        }
    }
}
