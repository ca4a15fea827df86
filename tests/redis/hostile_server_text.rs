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

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

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

/// A fake Redis that answers `INFO` with `version` and `CONFIG GET` with
/// `policy` (and a `maxmemory` above zero), and everything else with `+OK`.
fn fake_redis(version: &'static str, policy: &'static str) -> SocketAddr {
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
                        "# Server\r\nredis_version:{version}\r\nrun_id:0123456789abcdef\r\n\
                         uptime_in_seconds:100000\r\n"
                    )),
                    Some("TIME") => array(&["1700000000", "0"]),
                    Some("CONFIG") => array(&["maxmemory-policy", policy, "maxmemory", "1000000"]),
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
