//! What a hostile Redis server says reaches a `RedisLocker`'s errors
//! escaped: a version or a `maxmemory-policy` holding an escape sequence,
//! a bell or a bidirectional override shows as `\u{1b}`, `\u{7}` and
//! `\u{202e}` in the error, never raw, so that it cannot drive the
//! terminal or forge lines of the log that shows the error.
//!
//! The server here is a fake speaking just enough RESP2 on a loopback port
//! (no `redis-server` needed), from a thread that serves a bounded number
//! of connections and ends with the test.
#![cfg(all(feature = "redis", feature = "testing"))]

use std::net::SocketAddr;
use std::time::Duration;

use crate::fake_redis;
use quorum_lock::redis::{RedisConfig, RedisLocker};

/// Text that would retitle the terminal, ring it, clear it and reverse
/// what follows.
const HOSTILE: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{202e}";

/// The first character of `text` a terminal would act on, or that makes
/// text read otherwise than it is stored.
fn raw_unsafe(text: &str) -> Option<char> {
    text.chars()
        .find(|&c| c.is_control() || matches!(c, '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}'))
}

/// A fake Redis that answers `INFO` with `version` and `CONFIG GET` with
/// `policy` (and a `maxmemory` above zero), and everything else with `+OK`.
fn fake_redis(version: &'static str, policy: &'static str) -> SocketAddr {
    // Bounded: a connect makes one or two connections.
    fake_redis::serve(4, move |_, command| match command {
        "INFO" => Some(fake_redis::info(version, "0123456789abcdef")),
        "TIME" => fake_redis::common("TIME"),
        "CONFIG" => Some(fake_redis::array(&[
            "maxmemory-policy",
            policy,
            "maxmemory",
            "1000000",
        ])),
        _ => Some(fake_redis::OK.to_vec()),
    })
}

async fn connect_error(addr: SocketAddr) -> String {
    let config = RedisConfig {
        call_timeout: Duration::from_secs(5),
        ..RedisConfig::default()
    };
    match RedisLocker::connect(&format!("redis://{addr}"), config).await {
        Ok(_) => panic!("the fake Redis at {addr} was accepted"),
        Err(err) => err.to_string(),
    }
}

#[tokio::test]
async fn a_hostile_redis_version_reaches_the_error_escaped() {
    let version: &'static str = Box::leak(format!("5.0.0{HOSTILE}").into_boxed_str());
    let addr = fake_redis(version, "noeviction");
    let text = connect_error(addr).await;
    assert!(
        text.contains("too old"),
        "not the version's error: {text:?}"
    );
    if let Some(c) = raw_unsafe(&text) {
        panic!(
            "the error holds the raw character U+{:04X} from the server: {text:?}",
            u32::from(c)
        );
    }
    assert!(text.contains("\\u{1b}]0;pwned\\u{7}"), "{text:?}");
}

#[tokio::test]
async fn a_hostile_redis_eviction_policy_reaches_the_error_escaped() {
    let policy: &'static str = Box::leak(format!("allkeys-lru{HOSTILE}").into_boxed_str());
    let addr = fake_redis("7.2.4", policy);
    let text = connect_error(addr).await;
    assert!(text.contains("evict"), "not the eviction error: {text:?}");
    if let Some(c) = raw_unsafe(&text) {
        panic!(
            "the error holds the raw character U+{:04X} from the server: {text:?}",
            u32::from(c)
        );
    }
    assert!(text.contains("\\u{1b}]0;pwned\\u{7}"), "{text:?}");
}
