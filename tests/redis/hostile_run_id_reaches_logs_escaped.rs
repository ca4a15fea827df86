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

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use crate::log_capture::Capture;
use quorum_lock::redis::{RedisConfig, RedisLocker};

/// A run_id that returns to the start of the line and reverses the rest.
const HOSTILE_RUN_ID: &str = "0123abcd\rERROR forged \u{202e}gpj.exe";

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

/// A fake Redis that answers `INFO` with [`HOSTILE_RUN_ID`], `CONFIG GET`
/// with `noeviction`, `TIME` with a time, and everything else with `+OK`.
fn fake_redis() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake Redis");
    let addr = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        // Bounded: a connect makes one or two connections.
        for stream in listener.incoming().take(4) {
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
                    Some("INFO") => bulk(&format!(
                        "# Server\r\nredis_version:7.2.4\r\nrun_id:{HOSTILE_RUN_ID}\r\n\
                         uptime_in_seconds:100000\r\n"
                    )),
                    Some("TIME") => array(&["1700000000", "0"]),
                    Some("CONFIG") => array(&["maxmemory-policy", "noeviction", "maxmemory", "0"]),
                    Some("SCRIPT") => bulk("0123456789012345678901234567890123456789"),
                    _ => b"+OK\r\n".to_vec(),
                };
                if writer.write_all(&reply).is_err() {
                    break;
                }
            }
        }
    });
    addr
}

// The connect runs on this test's thread (a current-thread runtime), where
// the capture is the default subscriber.
#[tokio::test]
async fn a_hostile_redis_run_id_reaches_the_log_escaped() {
    let (capture, _guard) = Capture::install();
    let addr = fake_redis();
    let config = RedisConfig {
        call_timeout: Duration::from_secs(5),
        ..RedisConfig::default()
    };
    let locker = RedisLocker::connect(&format!("redis://{addr}"), config)
        .await
        .expect("the fake Redis is accepted");
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
