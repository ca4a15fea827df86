//! Reproduces a past break: a Redis server that answers the fencing script with a refusal whose value quotes the password (or carries a terminal escape) has it shown whole, neither masked nor escaped, in the `fence` error.
//!
//! docs/redis.md, "Credentials and TLS": a password "never appears" in
//! errors, logs and `Debug` output, and any run of 8 or more of its bytes
//! in text the server sends is shown as `***`; docs/lock-servers.md,
//! "Threat model": the `RedisLocker` escapes what its servers say, so that
//! a control character cannot drive the terminal that shows it. The fencing
//! script answers a kind and a value; for kind 2 (a floor ahead of the
//! clock) `fence` writes the value into "(its clock plus that is {value}
//! ns)", and for kinds 3 and 4 it quotes the value, a key, as `{:?}`;
//! neither goes through `escape_peer_text`. A hostile server, or without
//! TLS anyone answering in its place, puts the password it was sent, or an
//! escape sequence, in the error every caller logs.
//!
//! The server is the fake of `tests/redis/fake_redis.rs` on a loopback
//! port, from a thread that serves a bounded number of connections: it
//! takes the connection's checks and answers every script with `reply`.
#![cfg(all(feature = "redis", feature = "testing"))]

use std::time::Duration;

use crate::fake_redis;
use quorum_lock::redis::{RedisConfig, RedisLocker};
use quorum_lock::{LockArgs, LockMode, NetLocker};

/// The password in the node's URL.
const PASSWORD: &str = "Fk4sR8wQ2nY6tH3j";

/// The error of `fence` when the fake answers the script with `kind` and
/// `value`.
async fn fence_error(kind: i64, value: String) -> String {
    let mut reply = format!("*2\r\n:{kind}\r\n").into_bytes();
    reply.extend(fake_redis::bulk(&value));
    let reply: &'static [u8] = Box::leak(reply.into_boxed_slice());
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
        "EVALSHA" | "EVAL" => Some(reply.to_vec()),
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
    let args = LockArgs {
        uid: "holder".into(),
        resources: vec!["fenced".to_owned()].into(),
        owner: "owner".into(),
        source: "tests/redis".into(),
        quorum: 1,
    };
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        locker.fence(&args, LockMode::Write, 0),
    )
    .await
    .expect("fence ends within its timeout");
    let err = result.expect_err("the fake refuses every fencing token");
    format!("{err:?} / {err}")
}

fn assert_not_shown(shown: &str) {
    for piece in PASSWORD.as_bytes().windows(8) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        assert!(
            !shown.contains(piece),
            "the error shows the password ({piece} is a piece of it): {shown}"
        );
    }
}

#[tokio::test]
async fn a_floor_refusal_quoting_the_password_does_not_show_it() {
    let shown = fence_error(2, format!("{PASSWORD} \u{1b}]0;pwned\u{7}")).await;
    assert!(
        shown.contains("ahead of"),
        "not the floor's refusal: {shown}"
    );
    assert!(
        !shown.contains('\u{1b}'),
        "the error carries the server's escape character raw: {shown:?}"
    );
    assert_not_shown(&shown);
}

#[tokio::test]
async fn a_counter_refusal_quoting_the_password_does_not_show_it() {
    let prefix = RedisConfig::default().prefix;
    let shown = fence_error(4, format!("{prefix}{PASSWORD}")).await;
    assert!(
        shown.contains("not a token"),
        "not the counter's refusal: {shown}"
    );
    assert_not_shown(&shown);
}
