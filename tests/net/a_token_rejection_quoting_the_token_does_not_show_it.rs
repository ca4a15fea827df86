//! Reproduces a past break: a peer that rejects the client's `Hello` as an invalid token, quoting the token it got ("invalid token '<token>'"), has the token shown whole in the `Error::Unauthorized` that `RemoteLocker::connect` returns.
//!
//! Commit 83bd929: "no bytes of the token are ever shown from what a peer
//! sent". A `Welcome::Rejected` whose reason starts `invalid token` is
//! returned as `Error::Unauthorized { reason }`, its reason escaped and
//! nothing more: a server (or a proxy in its place) that quotes the token
//! it refused, as many services quote what they refuse, puts the client's
//! own token in the error every caller logs. (The sibling test
//! a_peer_quoting_the_hello_in_a_rejection_is_not_shown_the_token.rs
//! checks the other rejections, which leave the locker offline.)
//!
//! A stand-in on 127.0.0.1 reads the `Hello` and answers a `Rejected`
//! frame quoting the token. Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::Error;
use tokio::io::AsyncWriteExt;

use crate::{stand_in, wire};

/// A token of 32 bytes, as `openssl rand -hex 16` gives.
const SECRET: &str = "4be1d9a07c3f52e86a1b0d9c7e2f4a53";

#[tokio::test]
async fn a_token_rejection_quoting_the_token_does_not_show_it() {
    let (listener, addr) = stand_in::bind().await;
    let peer = tokio::spawn(async move {
        let mut held = Vec::new();
        for _ in 0..3 {
            let Ok(Ok((mut stream, _))) =
                tokio::time::timeout(Duration::from_secs(10), listener.accept()).await
            else {
                return;
            };
            let Ok(Ok(_hello)) =
                tokio::time::timeout(Duration::from_secs(5), wire::read_frame(&mut stream, 4096))
                    .await
            else {
                return;
            };
            let reason = format!("invalid token '{SECRET}'");
            let _ = stream
                .write_all(&wire::frame(&wire::rejected(&reason)))
                .await;
            held.push(stream);
        }
    });
    let mut config = stand_in::config();
    config.token = SECRET.to_owned();
    config.connect_timeout = Duration::from_secs(2);
    let result = tokio::time::timeout(Duration::from_secs(10), RemoteLocker::connect(addr, config))
        .await
        .expect("connect ends within its timeout");
    peer.abort();
    let err = match result {
        Ok(_) => panic!("a rejected token is an error"),
        Err(err) => err,
    };
    assert!(matches!(err, Error::Unauthorized { .. }), "{err:?}");
    let shown = format!("{err:?} / {err}");
    for piece in SECRET.as_bytes().windows(6) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        assert!(
            !shown.contains(piece),
            "the error shows the token ({piece} is a piece of it): {shown}"
        );
    }
}
