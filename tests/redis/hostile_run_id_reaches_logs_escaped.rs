//! What a hostile Redis server says reaches the `RedisLocker`'s logs
//! escaped (docs/redis.md and docs/lock-servers.md: a hostile server's
//! text is escaped before it enters an error or a log): the `run_id` of
//! its `INFO server`, which the locker logs when it connects, may hold a
//! carriage return or a bidirectional override, which would overwrite or
//! reverse the log line in any application that writes its logs with a
//! formatter that does not escape them (tracing-subscriber escapes ESC,
//! but neither of these).
//!
//! The server is a fake speaking just enough RESP2 on a loopback port,
//! from a thread that serves a bounded number of connections.
#![cfg(all(feature = "redis", feature = "testing"))]

use std::net::SocketAddr;
use std::time::Duration;

use crate::fake_redis;
use crate::log_capture::Capture;
use quorum_lock::redis::{RedisConfig, RedisLocker};

/// A run_id that returns to the start of the line and reverses the rest.
const HOSTILE_RUN_ID: &str = "0123abcd\rERROR forged \u{202e}gpj.exe";

/// A fake Redis that answers `INFO` with [`HOSTILE_RUN_ID`], `CONFIG GET`
/// with `noeviction`, `TIME` with a time, and everything else with `+OK`.
fn fake_redis() -> SocketAddr {
    // Bounded: a connect makes one or two connections.
    fake_redis::serve(4, |_, command| match command {
        "INFO" => Some(fake_redis::info("7.2.4", HOSTILE_RUN_ID)),
        "CONFIG" => Some(fake_redis::array(&[
            "maxmemory-policy",
            "noeviction",
            "maxmemory",
            "0",
        ])),
        other => fake_redis::common(other).or(Some(fake_redis::OK.to_vec())),
    })
}

/// A locker connected to a fresh fake Redis.
async fn connect() -> RedisLocker {
    let config = RedisConfig {
        call_timeout: Duration::from_secs(5),
        ..RedisConfig::default()
    };
    RedisLocker::connect(&format!("redis://{}", fake_redis()), config)
        .await
        .expect("the fake Redis is accepted")
}

// The connect runs on this test's thread (a current-thread runtime), where
// the capture is the default subscriber.
#[tokio::test]
async fn a_hostile_redis_run_id_reaches_the_log_escaped() {
    let (capture, _guard) = Capture::install();
    let locker = connect().await;
    let lines = capture.lines();
    let connected = capture.containing("0123abcd");
    assert!(
        !connected.is_empty(),
        "the run_id was not logged at all: {lines:?}"
    );
    for line in connected {
        assert!(
            !line.contains('\r') && !line.contains('\u{202e}'),
            "a log line holds the server's carriage return or override raw: {line:?}"
        );
    }
    drop(locker);
}

/// Other tests of this binary connect on threads without a capture, at any
/// moment: the first thread to run a log statement decides, for the whole
/// process, whether it is wanted. A connect there first must not silence
/// the line for a capture installed before it.
#[tokio::test]
async fn the_run_id_line_reaches_a_capture_after_a_thread_without_one_logged_it_first() {
    let (capture, _guard) = Capture::install();
    std::thread::spawn(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(connect())
    })
    .join()
    .expect("the other thread's connect");
    let locker = connect().await;
    assert!(
        !capture.containing("0123abcd").is_empty(),
        "the run_id line never reached the capture: {:?}",
        capture.lines()
    );
    drop(locker);
}
