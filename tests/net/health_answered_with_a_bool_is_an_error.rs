//! `RemoteLocker::health` answered with something other than `Health` is
//! not an answer: "Refusal is safe, silence is not". A reply of the wrong
//! kind must be an error that names it, as `status` makes it, not
//! "granting, no entries", which reads as a healthy, empty server.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::wire::{
    accepted, frame, read_frame, response, varint, OP_HEALTH, REPLY_BOOL, VERSION_6,
};
use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::NetLocker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Accepts any token at version 6 and answers every `Health` with
/// `Bool(true)`.
async fn bool_answering_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    tokio::spawn(async move {
        while let Ok((mut peer, _)) = listener.accept().await {
            tokio::spawn(async move {
                if read_frame(&mut peer, 4096).await.is_err() {
                    return;
                }
                let welcome = frame(&accepted(VERSION_6, Duration::from_secs(30)));
                if peer.write_all(&welcome).await.is_err() {
                    return;
                }
                while let Ok(request) = read_frame(&mut peer, 1 << 20).await {
                    let (id, op) = response(&request);
                    if op.first() != Some(&OP_HEALTH) {
                        continue;
                    }
                    let mut answer = varint(id);
                    answer.extend([REPLY_BOOL, 1]);
                    if peer.write_all(&frame(&answer)).await.is_err() {
                        return;
                    }
                }
                let mut buf = [0u8; 64];
                while peer.read(&mut buf).await.unwrap_or(0) > 0 {}
            });
        }
    });
    addr
}

#[tokio::test]
async fn a_health_call_answered_with_a_bool_is_an_error_not_a_healthy_empty_server() {
    let addr = bool_answering_server().await;
    let locker = RemoteLocker::connect(addr, RemoteConfig::new("secret"))
        .await
        .expect("a locker");
    assert!(locker.is_online(), "the fake server accepted the handshake");
    let health = locker.health().await;
    assert!(
        health.is_err(),
        "the server answered Health with Bool(true); the client returned {health:?}, \
         (quarantined, entries) as from a healthy server that holds nothing"
    );
}
