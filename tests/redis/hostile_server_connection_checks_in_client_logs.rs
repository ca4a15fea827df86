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

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use crate::log_capture::Capture;
use quorum_lock::redis::{RedisConfig, RedisLocker};
use quorum_lock::{LockArgs, NetLocker};
use tracing::Level;

const CALLS: usize = 100;

fn bulk(text: &str) -> Vec<u8> {
    let mut out = format!("${}\r\n", text.len()).into_bytes();
    out.extend(text.as_bytes());
    out.extend(b"\r\n");
    out
}

fn array(items: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", items.len()).into_bytes();
    for item in items {
        out.extend(bulk(item));
    }
    out
}

/// Reads one RESP2 command (an array of bulk strings); `None` at the end.
fn read_command(reader: &mut BufReader<std::net::TcpStream>) -> Option<Vec<String>> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let count: usize = line.trim().strip_prefix('*')?.parse().ok()?;
    let mut args = Vec::with_capacity(count.min(16));
    for _ in 0..count.min(64) {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let len: usize = line.trim().strip_prefix('$')?.parse().ok()?;
        let mut arg = vec![0; len.min(1 << 16) + 2];
        reader.read_exact(&mut arg).ok()?;
        arg.truncate(len);
        args.push(String::from_utf8_lossy(&arg).into_owned());
    }
    Some(args)
}

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
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake Redis");
    let addr = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().take(4 * CALLS).enumerate() {
            let Ok(stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let mut writer = stream.try_clone().expect("clone the stream");
            let mut reader = BufReader::new(stream);
            let run_id = match checks {
                Checks::NewRunIdEachConnection => format!("{n:040x}"),
                Checks::EvictingPolicyWithoutLimit => "0123456789abcdef".to_owned(),
            };
            for _ in 0..64 {
                let Some(args) = read_command(&mut reader) else {
                    break;
                };
                let name = args.first().map(|a| a.to_ascii_uppercase());
                let reply = match name.as_deref() {
                    Some("INFO") => bulk(&format!(
                        "# Server\r\nredis_version:7.2.4\r\nrun_id:{run_id}\r\n\
                         uptime_in_seconds:100000\r\n"
                    )),
                    Some("TIME") => array(&["1700000000", "0"]),
                    Some("CONFIG") => match checks {
                        Checks::NewRunIdEachConnection => {
                            b"-NOPERM this user has no permissions to run the 'config|get' \
                              command\r\n"
                                .to_vec()
                        }
                        Checks::EvictingPolicyWithoutLimit => {
                            array(&["maxmemory", "0", "maxmemory-policy", "allkeys-lru"])
                        }
                    },
                    Some("SCRIPT") => bulk("0123456789012345678901234567890123456789"),
                    Some("CLIENT") | Some("HELLO") | Some("PING") | Some("SELECT") => {
                        b"+OK\r\n".to_vec()
                    }
                    _ => break,
                };
                if writer.write_all(&reply).is_err() {
                    break;
                }
            }
        }
    });
    addr
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
