//! Reproduces a past break: a Redis URL password holding tab characters, which the URL parser strips before the client authenticates, is remembered with its tabs only, so a server error quoting the password the client sent shows it whole.
//!
//! docs/redis.md, "Credentials and TLS": "Errors, logs and `Debug` output
//! name the node by `host:port` only; a password never appears in them."
//!
//! What happens instead: the Redis client parses the node's URL with the
//! `url` crate, which removes every ASCII tab and newline from its input
//! (WHATWG URL parsing), so for `redis://app:Abcdefg<TAB>Hijklmn<TAB>
//! Opqrstu@…` it sends `AUTH app AbcdefgHijklmnOpqrstu`. The locker
//! remembers the password as written (`remember_url`), whose every run of
//! 8 bytes holds a tab; none is a run of what the server got, and an
//! error quoting it reaches the locker's error whole. (The same as
//! `tests/sql/a_database_refusal_quoting_a_url_password_with_tabs_does_not_show_it.rs`
//! for PostgreSQL.)
//!
//! The server is a fake speaking just enough RESP2 on a loopback port: it
//! accepts `AUTH`, keeping the password it got, and answers `INFO` with an
//! error quoting it. One thread, at most 4 connections of at most 64
//! commands, every read bounded in time.
#![cfg(all(feature = "redis", feature = "testing"))]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::fake_redis;
use quorum_lock::redis::{RedisConfig, RedisLocker};

/// The password as written in the URL: a tab after every seven bytes.
const WRITTEN: &str = "Abcdefg\tHijklmn\tOpqrstu";
/// What the client sends of it.
const SENT: &str = "AbcdefgHijklmnOpqrstu";

/// Reads one RESP2 command (an array of bulk strings); `None` at the end.
fn read_command(reader: &mut BufReader<std::net::TcpStream>) -> Option<Vec<String>> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let count: usize = line.trim().strip_prefix('*')?.parse().ok()?;
    let mut args = Vec::new();
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

#[tokio::test]
async fn a_redis_error_quoting_a_url_password_with_tabs_does_not_show_it() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake Redis");
    let addr = listener.local_addr().expect("its address");
    let got = Arc::new(Mutex::new(String::new()));
    {
        let got = got.clone();
        std::thread::spawn(move || {
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
                    let answer = match name.as_deref().unwrap_or("") {
                        "AUTH" => {
                            *got.lock().unwrap() = args.last().cloned().unwrap_or_default();
                            fake_redis::OK.to_vec()
                        }
                        "INFO" => format!(
                            "-ERR user app with password {} may not run INFO\r\n",
                            got.lock().unwrap()
                        )
                        .into_bytes(),
                        "TIME" => fake_redis::common("TIME").unwrap_or_default(),
                        _ => fake_redis::OK.to_vec(),
                    };
                    if writer.write_all(&answer).is_err() {
                        break;
                    }
                }
            }
        });
    }
    let config = RedisConfig {
        call_timeout: Duration::from_secs(5),
        ..RedisConfig::default()
    };
    let url = format!("redis://app:{WRITTEN}@{addr}");
    let result = tokio::time::timeout(Duration::from_secs(20), RedisLocker::connect(&url, config))
        .await
        .expect("connect ends within its timeout");
    let err = match result {
        Ok(_) => panic!("the fake Redis at {addr} was accepted"),
        Err(err) => err,
    };
    assert_eq!(
        *got.lock().unwrap(),
        SENT,
        "the password the client sent (error: {err})"
    );
    let shown = format!("{err:?} / {err}");
    for piece in SENT.as_bytes().windows(8) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        assert!(
            !shown.contains(piece),
            "the error shows the password ({piece} is a piece of it): {shown}"
        );
    }
}
