//! Reproduces a past break: a Redis server that answers the fast path's `SET NX` with a bulk string quoting the password has the password shown whole in the `lock` error.
//!
//! docs/redis.md, "Credentials and TLS": a password "never appears" in
//! errors, logs and `Debug` output, and any run of 8 or more of its bytes
//! in text the server sends is shown as `***`. The fast path of a grant
//! (one free resource, after a grant script answered outside the
//! quarantine) reports any answer but `OK` or nil as "Redis answered SET NX
//! with {reply:?}": the `Debug` form of the driver's value, which does not
//! go through `escape_peer_text` and so is not masked. A hostile server, or
//! without TLS anyone answering in its place, puts the password it was sent
//! in the error every caller logs.
//!
//! The server is a fake speaking just enough RESP2 on a loopback port (no
//! `redis-server` needed), from a thread that serves a bounded number of
//! connections: it takes the connection's checks, grants by the script once
//! (which opens the fast path), and answers `SET` with `reply`.
#![cfg(all(feature = "redis", feature = "testing"))]

use std::time::Duration;

use crate::fake_redis;
use quorum_lock::redis::{RedisConfig, RedisLocker};
use quorum_lock::{LockArgs, NetLocker};

/// The password in the node's URL.
const PASSWORD: &str = "Zq7pW2xK9mN4vB8c";

fn args(uid: &str, resource: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec![resource.to_owned()].into(),
        owner: "owner".into(),
        source: "tests/redis".into(),
        quorum: 1,
    }
}

/// The error of a fast-path grant the fake answers with `set_reply`.
async fn fast_path_error(set_reply: Vec<u8>) -> String {
    let set_reply: &'static [u8] = Box::leak(set_reply.into_boxed_slice());
    // Bounded: a connect makes one or two connections.
    let addr = fake_redis::serve(4, move |_, command| match command {
        "INFO" => Some(fake_redis::info("7.2.4", "0123456789abcdef")),
        "TIME" | "SCRIPT" => fake_redis::common(command),
        "CONFIG" => Some(fake_redis::array(&[
            "maxmemory-policy",
            "noeviction",
            "maxmemory",
            "0",
        ])),
        // The grant script grants: outside the quarantine.
        "EVALSHA" | "EVAL" => Some(b":1\r\n".to_vec()),
        "SET" => Some(set_reply.to_vec()),
        _ => Some(fake_redis::OK.to_vec()),
    });
    let config = RedisConfig {
        call_timeout: Duration::from_secs(5),
        ..RedisConfig::default()
    };
    let url = format!("redis://app:{PASSWORD}@{addr}");
    let locker = tokio::time::timeout(Duration::from_secs(20), RedisLocker::connect(&url, config))
        .await
        .expect("connect ends within its timeout")
        .expect("the fake Redis is accepted");
    // Two resources: the script, which opens the fast path.
    let warm = LockArgs {
        resources: vec!["a".to_owned(), "b".to_owned()].into(),
        ..args("warm-up", "a")
    };
    let granted = tokio::time::timeout(Duration::from_secs(10), locker.lock(&warm))
        .await
        .expect("the script grant ends within its timeout");
    assert_eq!(granted.ok(), Some(true), "the script grants");
    let result = tokio::time::timeout(Duration::from_secs(10), locker.lock(&args("u1", "job")))
        .await
        .expect("the fast-path grant ends within its timeout");
    let err = result.expect_err("a SET NX answered with neither OK nor nil is an error");
    let shown = format!("{err:?} / {err}");
    assert!(
        shown.contains("SET NX"),
        "not the fast path's error: {shown}"
    );
    shown
}

#[tokio::test]
async fn a_set_nx_answer_quoting_the_password_does_not_show_it() {
    let shown = fast_path_error(fake_redis::bulk(&format!("password was {PASSWORD}"))).await;
    for piece in PASSWORD.as_bytes().windows(8) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        assert!(
            !shown.contains(piece),
            "the error shows the password ({piece} is a piece of it): {shown}"
        );
    }
}
