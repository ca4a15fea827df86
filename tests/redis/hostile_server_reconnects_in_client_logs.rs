//! A hostile Redis server that accepts every connection, denies
//! `CONFIG GET` (as an ACL may) and drops the connection at the first lock
//! call cannot make the `RedisLocker` write a warning or two per call: what
//! the server decides how often happens is logged a bounded number of
//! times (docs/lock-servers.md, "A hostile server").
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

/// A fake Redis that answers the locker's connection checks, denies
/// `CONFIG GET`, and closes the connection at any other command.
fn fake_redis() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake Redis");
    let addr = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        for stream in listener.incoming().take(4 * CALLS) {
            let Ok(stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let mut writer = stream.try_clone().expect("clone the stream");
            let mut reader = BufReader::new(stream);
            for _ in 0..64 {
                let Some(args) = read_command(&mut reader) else {
                    break;
                };
                let name = args.first().map(|a| a.to_ascii_uppercase());
                let reply = match name.as_deref() {
                    Some("INFO") => bulk(
                        "# Server\r\nredis_version:7.2.4\r\nrun_id:0123456789abcdef\r\n\
                         uptime_in_seconds:100000\r\n",
                    ),
                    Some("TIME") => array(&["1700000000", "0"]),
                    Some("CONFIG") => {
                        b"-NOPERM this user has no permissions to run the 'config|get' command\r\n"
                            .to_vec()
                    }
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
