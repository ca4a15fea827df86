//! A hostile Redis server that accepts every connection, passes the
//! locker's connection checks with answers of its choosing and drops the
//! connection at the first lock call cannot make the `RedisLocker` write a
//! warning per call through those checks either: what the server decides
//! how often happens is logged a bounded number of times
//! (docs/lock-servers.md, "A hostile server": "Nor can it flood the
//! client's log").
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

/// How the fake answers the connection checks.
#[derive(Clone, Copy)]
enum Checks {
    /// A new `run_id` on every connection; `CONFIG GET` denied.
    NewRunIdEachConnection,
    /// The same `run_id`; `CONFIG GET` says `allkeys-lru` with no
    /// `maxmemory`.
    EvictingPolicyWithoutLimit,
}

/// A fake Redis that answers the locker's connection checks as `checks`
/// says, and closes the connection at any other command.
fn fake_redis(checks: Checks) -> SocketAddr {
    fake_redis::serve(4 * CALLS, move |n, command| {
        let run_id = match checks {
            Checks::NewRunIdEachConnection => format!("{n:040x}"),
            Checks::EvictingPolicyWithoutLimit => "0123456789abcdef".to_owned(),
        };
        match command {
            "INFO" => Some(fake_redis::info("7.2.4", &run_id)),
            "CONFIG" => Some(match checks {
                Checks::NewRunIdEachConnection => fake_redis::NOPERM.to_vec(),
                Checks::EvictingPolicyWithoutLimit => {
                    fake_redis::array(&["maxmemory", "0", "maxmemory-policy", "allkeys-lru"])
                }
            }),
            "CLIENT" | "HELLO" | "PING" | "SELECT" => Some(fake_redis::OK.to_vec()),
            other => fake_redis::common(other),
        }
    })
}

/// Makes `CALLS` lock calls through a locker of the fake; the warnings,
/// the calls that failed and how long they took.
async fn warnings_for(checks: Checks) -> (Vec<String>, usize, Duration) {
    let (capture, _guard) = Capture::install();
    let addr = fake_redis(checks);
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
    drop(locker);
    (capture.at_least(Level::WARN), failed, took)
}

fn check(warnings: &[String], failed: usize, took: Duration) {
    assert!(
        failed > CALLS / 2,
        "the fake did not drop the calls: {failed} failed"
    );
    // Each kind of line at most once a second, and a few kinds (the
    // check's own, the dropped call), would stay within this.
    let allowed = 3 * (took.as_secs() as usize + 2);
    assert!(
        warnings.len() <= allowed,
        "{} warnings for {CALLS} calls in {took:?} (at most {allowed} expected); the first \
         three: {:?}",
        warnings.len(),
        &warnings[..warnings.len().min(3)]
    );
}

#[tokio::test]
async fn a_redis_with_a_new_run_id_on_every_connection_makes_a_bounded_number_of_warnings() {
    let (warnings, failed, took) = warnings_for(Checks::NewRunIdEachConnection).await;
    check(&warnings, failed, took);
}

#[tokio::test]
async fn a_redis_reporting_an_evicting_policy_on_every_connection_makes_a_bounded_number_of_warnings(
) {
    let (warnings, failed, took) = warnings_for(Checks::EvictingPolicyWithoutLimit).await;
    check(&warnings, failed, took);
}
