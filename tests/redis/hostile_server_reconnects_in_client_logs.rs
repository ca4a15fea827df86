//! A hostile Redis server that accepts every connection, denies
//! `CONFIG GET` (as an ACL may) and drops the connection at the first lock
//! call cannot make the `RedisLocker` write a warning or two per call: what
//! the server decides how often happens is logged a bounded number of
//! times (docs/lock-servers.md, "A hostile server").
//!
//! The server is a fake speaking just enough RESP2 on a loopback port,
//! from a thread that serves a bounded number of connections.
#![cfg(all(feature = "redis", feature = "testing"))]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::fake_redis;
use crate::log_capture::Capture;
use quorum_lock::redis::{RedisConfig, RedisLocker};
use quorum_lock::{LockArgs, NetLocker};
use tracing::Level;

const CALLS: usize = 100;

/// A fake Redis that answers the locker's connection checks, denies
/// `CONFIG GET`, and closes the connection at any other command.
fn fake_redis() -> SocketAddr {
    fake_redis::serve(4 * CALLS, |_, command| match command {
        "INFO" => Some(fake_redis::info("7.2.4", "0123456789abcdef")),
        "CONFIG" => Some(fake_redis::NOPERM.to_vec()),
        "CLIENT" | "HELLO" | "PING" | "SELECT" => Some(fake_redis::OK.to_vec()),
        other => fake_redis::common(other),
    })
}

#[tokio::test]
async fn a_redis_that_drops_every_connection_makes_a_bounded_number_of_warnings() {
    let (capture, _guard) = Capture::install();
    let addr = fake_redis();
    let config = RedisConfig {
        call_timeout: Duration::from_secs(5),
        ..RedisConfig::default()
    };
    let locker = RedisLocker::connect(&format!("redis://{addr}"), config)
        .await
        .expect("the fake Redis is accepted");
    let started = Instant::now();
    let mut failed = 0;
    for i in 0..CALLS {
        let args = LockArgs {
            uid: format!("uid-{i}").into(),
            resources: vec!["r".to_string()].into(),
            owner: "owner".into(),
            source: "tests/redis".into(),
            quorum: 1,
        };
        if locker.lock(&args).await.is_err() {
            failed += 1;
        }
    }
    let took = started.elapsed();
    let warnings = capture.at_least(Level::WARN);
    assert!(
        failed > CALLS / 2,
        "the fake did not drop the calls: {failed} failed"
    );
    // Two kinds of line (the denied check, the dropped call), each at most
    // once a second, would stay within this.
    let allowed = 2 * (took.as_secs() as usize + 2);
    assert!(
        warnings.len() <= allowed,
        "{} warnings for {CALLS} calls in {took:?} (at most {allowed} expected); the first \
         three: {:?}",
        warnings.len(),
        &warnings[..warnings.len().min(3)]
    );
    drop(locker);
}
