//! A `RemoteLocker` pointed at something that is no lock server says what
//! answered, and says it as soon as the answer arrives rather than at the
//! end of the connect timeout: a Redis server, a web server, some other
//! text or bytes, a peer that says nothing, a port nobody listens on.
#![cfg(feature = "net")]

use std::time::{Duration, Instant};

use std::sync::Arc;

use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::{Dsync, Error, NetLocker};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Long enough that a reason found by waiting it out cannot pass for one
/// found from the answer.
const PATIENT: Duration = Duration::from_secs(30);

/// A loopback listener that answers every connection with `answer` once
/// the client sent something, then keeps the connection open until the
/// client closes it (so that nothing but the answer can tell the client).
async fn answering(answer: &'static [u8]) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    tokio::spawn(async move {
        while let Ok((mut peer, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 512];
                if peer.read(&mut buf).await.unwrap_or(0) == 0 {
                    return;
                }
                if !answer.is_empty() && peer.write_all(answer).await.is_err() {
                    return;
                }
                while peer.read(&mut buf).await.unwrap_or(0) > 0 {}
            });
        }
    });
    addr
}

/// Connects with `timeout` and returns why the locker is offline, and how
/// long connecting took.
async fn reason(addr: &str, timeout: Duration) -> (String, Duration) {
    let mut config = RemoteConfig::new("client-secret");
    config.connect_timeout = timeout;
    let started = Instant::now();
    let locker = RemoteLocker::connect(addr, config)
        .await
        .expect("an offline locker, not an error");
    let took = started.elapsed();
    assert!(!locker.is_online(), "{addr} is no lock server");
    let why = locker
        .connect_error()
        .map(|e| e.to_string())
        .expect("a reason");
    (why, took)
}

#[tokio::test]
async fn a_redis_server_is_named_at_once() {
    let addr =
        answering(b"-ERR unknown command '\x00\x00\x00', with args beginning with: \r\n").await;
    let (why, took) = reason(&addr, PATIENT).await;
    assert!(
        why.contains("it is a Redis server, not a lock server"),
        "{why}"
    );
    assert!(why.contains("\"-ERR unknown command"), "{why}");
    assert!(took < PATIENT / 3, "took {took:?}: waited for the timeout");
}

#[tokio::test]
async fn a_web_server_and_other_text_are_named_at_once() {
    let http = answering(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n").await;
    let (why, took) = reason(&http, PATIENT).await;
    assert!(why.contains("it is an HTTP server"), "{why}");
    assert!(took < PATIENT / 3, "took {took:?}");

    let ssh = answering(b"SSH-2.0-OpenSSH_9.6\r\n").await;
    let (why, took) = reason(&ssh, PATIENT).await;
    assert!(
        why.contains("\"SSH-2.0-OpenSSH_9.6\", which is not the lock protocol"),
        "{why}"
    );
    assert!(took < PATIENT / 3, "took {took:?}");
}

#[tokio::test]
async fn a_frame_that_is_no_welcome_is_named_at_once() {
    // A well-formed frame whose payload is no `Welcome`: named by the
    // bytes as they came, its length too.
    let binary = answering(&[0, 0, 0, 3, 0xff, 0xff, 0xff]).await;
    let (why, took) = reason(&binary, PATIENT).await;
    assert!(
        why.contains("bytes that are not the lock protocol (00 00 00 03 ff ff ff)"),
        "{why}"
    );
    assert!(took < PATIENT / 3, "took {took:?}");
}

#[tokio::test]
async fn a_silent_peer_and_a_cut_answer_are_told_apart() {
    // Says nothing, as a Redis server does to a lock handshake.
    let silent = answering(b"").await;
    let (why, _) = reason(&silent, Duration::from_millis(300)).await;
    for words in [
        "accepted the connection but did not answer the handshake within 300ms",
        "it is stopped or overloaded, or it is not a lock server",
        "Redis",
    ] {
        assert!(why.contains(words), "{words:?} missing: {why}");
    }

    // Fewer bytes than a frame's length, then nothing.
    let short = answering(b"OK\n").await;
    let (why, _) = reason(&short, Duration::from_millis(300)).await;
    assert!(
        why.contains("\"OK\", which is not the lock protocol"),
        "{why}"
    );
    assert!(why.contains("sent nothing more within 300ms"), "{why}");
}

#[tokio::test]
async fn a_port_nobody_listens_on_is_named() {
    // Bound without listening for the whole test, so that no server
    // another test starts meanwhile can take the port.
    let held = tokio::net::TcpSocket::new_v4().expect("socket");
    held.bind("127.0.0.1:0".parse().expect("address"))
        .expect("bind");
    let addr = held.local_addr().expect("address").to_string();
    let (why, _) = reason(&addr, PATIENT).await;
    assert!(
        why.contains("cannot connect: connection refused, nothing listens"),
        "{why}"
    );
}

#[tokio::test]
async fn a_failed_lock_names_what_answered_on_each_server() {
    // The reason reaches the lock's error, not only `connect_error`.
    let mut lockers: Vec<Arc<dyn NetLocker>> = Vec::new();
    let mut addrs = Vec::new();
    for _ in 0..3 {
        let addr = answering(b"-ERR unknown command\r\n").await;
        let locker = RemoteLocker::connect(addr.clone(), RemoteConfig::new("client-secret"))
            .await
            .expect("an offline locker, not an error");
        lockers.push(Arc::new(locker));
        addrs.push(addr);
    }
    let ds = Dsync::new(lockers).expect("dsync");
    let err = ds
        .rw_mutex(["x"])
        .unwrap()
        .try_lock()
        .await
        .expect_err("no lock server");
    let Error::QuorumUnavailable { unreachable, .. } = &err else {
        panic!("expected QuorumUnavailable, got {err:?}");
    };
    let named: Vec<&str> = unreachable.iter().map(|u| u.endpoint.as_str()).collect();
    assert_eq!(named, addrs, "{err}");
    for node in unreachable {
        assert!(
            node.reason
                .contains("it is a Redis server, not a lock server"),
            "{node}"
        );
    }
}
