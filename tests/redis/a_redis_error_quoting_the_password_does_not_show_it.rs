//! Reproduces a past break: a Redis server that answers a call with an error quoting the password the client authenticated with has the password shown whole in the `RedisLocker`'s error.
//!
//! docs/redis.md, "Credentials and TLS": "Errors, logs and `Debug` output
//! name the node by `host:port` only; a password never appears in them."
//! A server error's text is shown as the server sent it (escaped, cut at
//! 200 characters): a hostile server, or without TLS anyone answering in
//! its place, that quotes the password it was sent puts it in the error
//! every caller logs.
//!
//! The server is a fake speaking just enough RESP2 on a loopback port (no
//! `redis-server` needed), from a thread that serves a bounded number of
//! connections: it accepts `AUTH` and answers `INFO` with an error quoting
//! the password.
#![cfg(all(feature = "redis", feature = "testing"))]

use std::time::Duration;

use crate::fake_redis;
use quorum_lock::redis::{RedisConfig, RedisLocker};

/// The password in the node's URL.
const PASSWORD: &str = "Zq7pW2xK9mN4vB8c";

#[tokio::test]
async fn a_redis_error_quoting_the_password_does_not_show_it() {
    let error: &'static [u8] = Box::leak(
        format!("-ERR user app with password {PASSWORD} may not run INFO\r\n")
            .into_bytes()
            .into_boxed_slice(),
    );
    // Bounded: a connect makes one or two connections.
    let addr = fake_redis::serve(4, move |_, command| match command {
        "INFO" => Some(error.to_vec()),
        "TIME" => fake_redis::common("TIME"),
        _ => Some(fake_redis::OK.to_vec()),
    });
    let config = RedisConfig {
        call_timeout: Duration::from_secs(5),
        ..RedisConfig::default()
    };
    let url = format!("redis://app:{PASSWORD}@{addr}");
    let result = tokio::time::timeout(Duration::from_secs(20), RedisLocker::connect(&url, config))
        .await
        .expect("connect ends within its timeout");
    let err = match result {
        Ok(_) => panic!("the fake Redis at {addr} was accepted"),
        Err(err) => err,
    };
    let shown = format!("{err:?} / {err}");
    for piece in PASSWORD.as_bytes().windows(6) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        assert!(
            !shown.contains(piece),
            "the error shows the password ({piece} is a piece of it): {shown}"
        );
    }
}

/// The same through the words the locker quotes from a reply rather than
/// an error: a `maxmemory-policy` that quotes the password, refused as one
/// that may evict lock keys.
#[tokio::test]
async fn a_redis_setting_quoting_the_password_does_not_show_it() {
    let policy: &'static str = Box::leak(format!("allkeys-lru-{PASSWORD}").into_boxed_str());
    // Bounded: a connect makes one or two connections.
    let addr = fake_redis::serve(4, move |_, command| match command {
        "INFO" => Some(fake_redis::info("7.2.4", "0123456789abcdef")),
        "TIME" => fake_redis::common("TIME"),
        "CONFIG" => Some(fake_redis::array(&[
            "maxmemory-policy",
            policy,
            "maxmemory",
            "1000000",
        ])),
        _ => Some(fake_redis::OK.to_vec()),
    });
    let config = RedisConfig {
        call_timeout: Duration::from_secs(5),
        ..RedisConfig::default()
    };
    let url = format!("redis://app:{PASSWORD}@{addr}");
    let result = tokio::time::timeout(Duration::from_secs(20), RedisLocker::connect(&url, config))
        .await
        .expect("connect ends within its timeout");
    let err = match result {
        Ok(_) => panic!("the fake Redis at {addr} was accepted"),
        Err(err) => err,
    };
    let shown = format!("{err:?} / {err}");
    assert!(shown.contains("evict"), "not the eviction error: {shown}");
    for piece in PASSWORD.as_bytes().windows(6) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        assert!(
            !shown.contains(piece),
            "the error shows the password ({piece} is a piece of it): {shown}"
        );
    }
}
