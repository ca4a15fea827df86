//! A stand-in peer that answers each client's `Hello` with bytes made from
//! it (sent back, quoted, cut), for the tests that check that no part of
//! the token is ever shown; and what a locker with `token` then says of it.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::NetLocker;
use tokio::io::AsyncWriteExt;

use crate::{stand_in, wire};

/// What `connect_error` says (`Debug` and `Display`) of a peer on
/// 127.0.0.1 that reads each `Hello` frame and writes back `answer(its
/// payload)`, keeping the connection open, to a locker whose token is
/// `token`. Real time (sockets), every wait bounded.
pub async fn shown_of_a_peer_answering(token: &str, answer: fn(&[u8]) -> Vec<u8>) -> String {
    let (listener, addr) = stand_in::bind().await;
    let peer = tokio::spawn(async move {
        let mut held = Vec::new();
        for _ in 0..5 {
            let Ok(Ok((mut stream, _))) =
                tokio::time::timeout(Duration::from_secs(10), listener.accept()).await
            else {
                return;
            };
            let Ok(Ok(hello)) =
                tokio::time::timeout(Duration::from_secs(5), wire::read_frame(&mut stream, 4096))
                    .await
            else {
                return;
            };
            let _ = stream.write_all(&answer(&hello)).await;
            held.push(stream);
        }
    });
    let mut config = stand_in::config();
    config.token = token.to_owned();
    config.connect_timeout = Duration::from_secs(2);
    let locker = tokio::time::timeout(Duration::from_secs(10), RemoteLocker::connect(addr, config))
        .await
        .expect("connect ends within its timeout")
        .expect("an offline locker, not an error");
    assert!(!locker.is_online(), "the peer answered no Welcome");
    let shown = format!("{:?} / {}", locker.connect_error(), {
        match locker.connect_error() {
            Some(err) => err.to_string(),
            None => String::new(),
        }
    });
    drop(locker);
    peer.abort();
    shown
}
