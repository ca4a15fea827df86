//! Reproduces a past break: a Redis server that answers the fast path's `SET NX` with a bulk string that is not UTF-8 has the password it quotes shown, byte by byte in decimal, in the `lock` error.
//!
//! docs/redis.md, "Credentials and TLS": a password "never appears" in
//! errors, logs and `Debug` output, and any run of 8 or more of its bytes
//! in text the server sends is shown as `***`. The fast path reports an
//! answer but `OK` or nil as the `Debug` form of the driver's value, masked
//! by `escape_peer_text`; but the driver shows a bulk string that is not
//! UTF-8 as `binary-data([80, 97, ...])`, the bytes as decimal numbers,
//! which no run of the remembered password matches. A hostile server adds
//! one byte that is not UTF-8 (0xff) after the password it was sent, and
//! every caller's error holds the password, readable by decoding the list.
//!
//! The server is the fake of `a_set_nx_answer_quoting_the_password_does_not_show_it`.
#![cfg(all(feature = "redis", feature = "testing"))]

use std::time::Duration;

use crate::fake_redis;
use quorum_lock::redis::{RedisConfig, RedisLocker};
use quorum_lock::{LockArgs, NetLocker};

/// The password in the node's URL.
const PASSWORD: &str = "Hv3rT8sLq2Wd6Yp1";

fn args(uid: &str, resources: &[&str]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: resources
            .iter()
            .map(|r| (*r).to_owned())
            .collect::<Vec<_>>()
            .into(),
        owner: "owner".into(),
        source: "tests/redis".into(),
        quorum: 1,
    }
}

/// `bytes` as RESP's bulk string.
fn bulk_bytes(bytes: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", bytes.len()).into_bytes();
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
    out
}

#[tokio::test]
async fn a_set_nx_answer_of_binary_data_quoting_the_password_does_not_show_it() {
    let mut quoted = PASSWORD.as_bytes().to_vec();
    quoted.push(0xff);
    let set_reply: &'static [u8] = Box::leak(bulk_bytes(&quoted).into_boxed_slice());
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
    let granted = tokio::time::timeout(
        Duration::from_secs(10),
        locker.lock(&args("warm-up", &["a", "b"])),
    )
    .await
    .expect("the script grant ends within its timeout");
    assert_eq!(granted.ok(), Some(true), "the script grants");
    let result = tokio::time::timeout(Duration::from_secs(10), locker.lock(&args("u1", &["job"])))
        .await
        .expect("the fast-path grant ends within its timeout");
    let err = result.expect_err("a SET NX answered with neither OK nor nil is an error");
    let shown = format!("{err:?} / {err}");
    assert!(
        shown.contains("SET NX"),
        "not the fast path's error: {shown}"
    );
    // The password's bytes as the driver's `Debug` of a byte vector lists them.
    for piece in PASSWORD.as_bytes().windows(8) {
        let decimal = piece
            .iter()
            .map(u8::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        assert!(
            !shown.contains(&decimal),
            "the error shows the password as decimal bytes ({decimal} is a piece of it): {shown}"
        );
    }
}
