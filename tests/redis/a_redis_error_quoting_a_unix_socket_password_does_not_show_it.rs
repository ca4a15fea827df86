//! Reproduces a past break: a Redis server on a Unix socket (`redis+unix:///path?pass=…`, the password in the driver's `pass` parameter) that quotes the password in an error has the password shown whole in the `RedisLocker`'s error.
//!
//! docs/redis.md, "Credentials and TLS": a password "never appears" in
//! errors, logs and `Debug` output, and any run of 8 or more of its bytes
//! in text the server sends is shown as `***`. The locker remembers a
//! URL's password from its user information or a query parameter whose
//! name holds `password`; the Redis driver takes the password of a Unix
//! socket URL from the parameter `pass`, which the locker accepts and
//! sends but never remembers. A server (or whatever listens on that path)
//! that quotes the password it was sent puts it in the error every caller
//! logs.
//!
//! The server is a fake speaking just enough RESP2 on a Unix socket in a
//! directory of the test's own, from a thread that serves a bounded
//! number of connections: it accepts `AUTH` and answers `INFO` with an
//! error quoting the password `AUTH` sent.
#![cfg(all(feature = "redis", feature = "testing", unix))]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Duration;

use quorum_lock::redis::{RedisConfig, RedisLocker};

/// The password in the node's URL.
const PASSWORD: &str = "Zq7pW2xK9mN4vB8c";

/// Reads one RESP2 command, its name in capitals; `None` at the end.
fn read_command(reader: &mut BufReader<UnixStream>) -> Option<Vec<String>> {
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
    if let Some(name) = args.first_mut() {
        *name = name.to_ascii_uppercase();
    }
    Some(args)
}

fn serve_one(stream: UnixStream) -> Option<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut writer = stream.try_clone().ok()?;
    let mut reader = BufReader::new(stream);
    // The password the client authenticated with, as it sent it.
    let mut sent = String::from("(none)");
    for _ in 0..16 {
        let args = read_command(&mut reader)?;
        let answer = match args.first().map(String::as_str) {
            Some("AUTH" | "HELLO") => {
                sent = args.last().cloned().unwrap_or_default();
                "+OK\r\n".to_owned()
            }
            Some("INFO") => format!("-ERR user default with password {sent} may not run INFO\r\n"),
            _ => "+OK\r\n".to_owned(),
        };
        writer.write_all(answer.as_bytes()).ok()?;
    }
    Some(())
}

#[tokio::test]
async fn a_redis_error_quoting_a_unix_socket_password_does_not_show_it() {
    let dir = std::env::temp_dir().join(format!("quorum-lock-unix-redis-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory for the socket");
    let path = dir.join("redis.sock");
    let listener = UnixListener::bind(&path).expect("bind the fake Redis");
    std::thread::spawn(move || {
        // Bounded: a connect makes one or two connections.
        for stream in listener.incoming().take(4) {
            let Ok(stream) = stream else { continue };
            let _ = serve_one(stream);
        }
    });
    let config = RedisConfig {
        call_timeout: Duration::from_secs(5),
        ..RedisConfig::default()
    };
    let url = format!("redis+unix://{}?pass={PASSWORD}", path.display());
    let result = tokio::time::timeout(Duration::from_secs(20), RedisLocker::connect(&url, config))
        .await
        .expect("connect ends within its timeout");
    let _ = std::fs::remove_dir_all(&dir);
    let err = match result {
        Ok(_) => panic!("the fake Redis at {} was accepted", path.display()),
        Err(err) => err,
    };
    let shown = format!("{err:?} / {err}");
    assert!(shown.contains("INFO"), "not the INFO refusal: {shown}");
    for piece in PASSWORD.as_bytes().windows(8) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        assert!(
            !shown.contains(piece),
            "the error shows the password ({piece} is a piece of it): {shown}"
        );
    }
}
