//! A Redis server that quotes the password the client authenticated with,
//! in an error, a setting or an answer, never gets it shown: docs/redis.md,
//! "Credentials and TLS": "Errors, logs and `Debug` output name the node by
//! `host:port` only; a password never appears in them", and any run of 8 or
//! more of its bytes in text the server sends is shown as `***`. A hostile
//! server, or without TLS anyone answering in its place, would otherwise
//! put the password in the error every caller logs.
//!
//! The servers are fakes speaking just enough RESP2 on a loopback port (no
//! `redis-server` needed), each from a thread that serves a bounded number
//! of connections (a connect makes one or two).
#![cfg(all(feature = "redis", feature = "testing"))]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::fake_redis;
use quorum_lock::redis::{RedisConfig, RedisLocker};
use quorum_lock::{Error, LockArgs, LockMode, NetLocker};

/// The password in the node's URL.
const PASSWORD: &str = "Zq7pW2xK9mN4vB8c";

fn config() -> RedisConfig {
    RedisConfig {
        call_timeout: Duration::from_secs(5),
        ..RedisConfig::default()
    }
}

/// The error of a `connect` to `url`, which the fake refuses somehow.
async fn connect_error(url: &str) -> Error {
    let result = tokio::time::timeout(Duration::from_secs(20), RedisLocker::connect(url, config()))
        .await
        .expect("connect ends within its timeout");
    match result {
        Ok(_) => panic!("the fake Redis of {url} was accepted"),
        Err(err) => err,
    }
}

/// Panics when `shown` holds any run of `window` bytes of `password`.
fn assert_no_piece(shown: &str, password: &str, window: usize) {
    for piece in password.as_bytes().windows(window) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        assert!(
            !shown.contains(piece),
            "the error shows the password ({piece} is a piece of it): {shown}"
        );
    }
}

/// Reproduces a past break: a Redis server that answers a call with an error quoting the password the client authenticated with has the password shown whole in the `RedisLocker`'s error.
///
/// A server error's text is shown as the server sent it (escaped, cut at
/// 200 characters). The fake accepts `AUTH` and answers `INFO` with an
/// error quoting the password.
#[tokio::test]
async fn a_redis_error_quoting_the_password_does_not_show_it() {
    let error: &'static [u8] = Box::leak(
        format!("-ERR user app with password {PASSWORD} may not run INFO\r\n")
            .into_bytes()
            .into_boxed_slice(),
    );
    let addr = fake_redis::serve(4, move |_, command| match command {
        "INFO" => Some(error.to_vec()),
        "TIME" => fake_redis::common("TIME"),
        _ => Some(fake_redis::OK.to_vec()),
    });
    let err = connect_error(&format!("redis://app:{PASSWORD}@{addr}")).await;
    assert_no_piece(&format!("{err:?} / {err}"), PASSWORD, 6);
}

/// The same through the words the locker quotes from a reply rather than
/// an error: a `maxmemory-policy` that quotes the password, refused as one
/// that may evict lock keys.
#[tokio::test]
async fn a_redis_setting_quoting_the_password_does_not_show_it() {
    let policy: &'static str = Box::leak(format!("allkeys-lru-{PASSWORD}").into_boxed_str());
    let addr = fake_redis::serve(4, move |_, command| match command {
        "INFO" => Some(fake_redis::info("7.2.4", "0123456789abcdef")),
        "TIME" => fake_redis::common("TIME"),
        "CONFIG" => Some(fake_redis::array(&[
            "maxmemory-policy",
            policy,
            "maxmemory",
            "1000000",
        ])),
        _ => Some(fake_redis::OK.to_vec()),
    });
    let err = connect_error(&format!("redis://app:{PASSWORD}@{addr}")).await;
    let shown = format!("{err:?} / {err}");
    assert!(shown.contains("evict"), "not the eviction error: {shown}");
    assert_no_piece(&shown, PASSWORD, 6);
}

/// Serves one connection of a fake that keeps in `got` the password the
/// client authenticated with (`AUTH`, or `HELLO … AUTH user password`),
/// as the client sent it, and answers `INFO` with an error quoting it: at
/// most 64 commands, every read bounded in time by the caller.
fn serve_quoting_auth(mut reader: impl BufRead, mut writer: impl Write, got: &Mutex<String>) {
    for _ in 0..64 {
        let Some(args) = fake_redis::read_command(&mut reader) else {
            break;
        };
        let name = args.first().map(|a| a.to_ascii_uppercase());
        let answer = match name.as_deref().unwrap_or("") {
            "AUTH" | "HELLO" => {
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

/// Reproduces a past break: a Redis URL password holding tab characters, which the URL parser strips before the client authenticates, is remembered with its tabs only, so a server error quoting the password the client sent shows it whole.
///
/// The Redis client parses the node's URL with the `url` crate, which
/// removes every ASCII tab and newline from its input (WHATWG URL
/// parsing), so for `redis://app:Abcdefg<TAB>Hijklmn<TAB>Opqrstu@…` it
/// sends `AUTH app AbcdefgHijklmnOpqrstu`; the locker remembered the
/// password as written, whose every run of 8 bytes holds a tab. (The same
/// as `tests/sql/a_database_refusal_quoting_a_url_password_with_tabs_does_not_show_it.rs`
/// for PostgreSQL.) The fake keeps the password `AUTH` got and answers
/// `INFO` with an error quoting it, from one thread, on at most 4
/// connections.
#[tokio::test]
async fn a_redis_error_quoting_a_url_password_with_tabs_does_not_show_it() {
    /// The password as written in the URL: a tab after every seven bytes.
    const WRITTEN: &str = "Abcdefg\tHijklmn\tOpqrstu";
    /// What the client sends of it.
    const SENT: &str = "AbcdefgHijklmnOpqrstu";
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake Redis");
    let addr = listener.local_addr().expect("its address");
    let got = Arc::new(Mutex::new(String::new()));
    {
        let got = got.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().take(4) {
                let Ok(stream) = stream else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let writer = stream.try_clone().expect("clone the stream");
                serve_quoting_auth(BufReader::new(stream), writer, &got);
            }
        });
    }
    let err = connect_error(&format!("redis://app:{WRITTEN}@{addr}")).await;
    assert_eq!(
        *got.lock().unwrap(),
        SENT,
        "the password the client sent (error: {err})"
    );
    assert_no_piece(&format!("{err:?} / {err}"), SENT, 8);
}

fn args(uid: &str, resources: &[&str]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: resources
            .iter()
            .map(|r| (*r).to_owned())
            .collect::<Vec<_>>()
            .into(),
        owner: "owner".into(),
        source: "tests/redis".into(),
        quorum: 1,
    }
}

/// A locker connected to a fake holding `password` whose checks of a
/// connection pass (version, clock, scripts, eviction policy), and which
/// answers every script with `script` and `SET` with `set` (`None`: OK).
async fn checked_fake(password: &str, script: Vec<u8>, set: Option<Vec<u8>>) -> RedisLocker {
    let script: &'static [u8] = Box::leak(script.into_boxed_slice());
    let set: Option<&'static [u8]> = set.map(|set| &*Box::leak(set.into_boxed_slice()));
    let addr = fake_redis::serve(4, move |_, command| match command {
        "INFO" => Some(fake_redis::info("7.2.4", "0123456789abcdef")),
        "TIME" | "SCRIPT" => fake_redis::common(command),
        "CONFIG" => Some(fake_redis::array(&[
            "maxmemory-policy",
            "noeviction",
            "maxmemory",
            "0",
        ])),
        "EVALSHA" | "EVAL" => Some(script.to_vec()),
        "SET" => Some(set.unwrap_or(fake_redis::OK).to_vec()),
        _ => Some(fake_redis::OK.to_vec()),
    });
    let url = format!("redis://app:{password}@{addr}");
    tokio::time::timeout(
        Duration::from_secs(20),
        RedisLocker::connect(&url, config()),
    )
    .await
    .expect("connect ends within its timeout")
    .expect("the fake Redis is accepted")
}

/// The error of a fast-path grant (one free resource, after a grant script
/// answered outside the quarantine) that a fake holding `password` answers
/// with `set_reply`: the script grants once, which opens the fast path.
async fn fast_path_error(password: &str, set_reply: Vec<u8>) -> String {
    let locker = checked_fake(password, b":1\r\n".to_vec(), Some(set_reply)).await;
    // Two resources: the script, which opens the fast path.
    let granted = tokio::time::timeout(
        Duration::from_secs(10),
        locker.lock(&args("warm-up", &["a", "b"])),
    )
    .await
    .expect("the script grant ends within its timeout");
    assert_eq!(granted.ok(), Some(true), "the script grants");
    let result = tokio::time::timeout(Duration::from_secs(10), locker.lock(&args("u1", &["job"])))
        .await
        .expect("the fast-path grant ends within its timeout");
    let err = result.expect_err("a SET NX answered with neither OK nor nil is an error");
    let shown = format!("{err:?} / {err}");
    assert!(
        shown.contains("SET NX"),
        "not the fast path's error: {shown}"
    );
    shown
}

/// Reproduces a past break: a Redis server that answers the fast path's `SET NX` with a bulk string quoting the password has the password shown whole in the `lock` error.
///
/// The fast path reported any answer but `OK` or nil as "Redis answered
/// SET NX with {reply:?}", the `Debug` form of the driver's value, which
/// did not go through `escape_peer_text` and so was not masked.
#[tokio::test]
async fn a_set_nx_answer_quoting_the_password_does_not_show_it() {
    let quoted = fake_redis::bulk(&format!("password was {PASSWORD}"));
    let shown = fast_path_error(PASSWORD, quoted).await;
    assert_no_piece(&shown, PASSWORD, 8);
}

/// Reproduces a past break: a Redis server that answers the fast path's `SET NX` with a bulk string that is not UTF-8 has the password it quotes shown, byte by byte in decimal, in the `lock` error.
///
/// The driver shows a bulk string that is not UTF-8 as
/// `binary-data([80, 97, ...])`, the bytes as decimal numbers, which no
/// run of the remembered password matches: a hostile server adds one byte
/// that is not UTF-8 (0xff) after the password it was sent.
#[tokio::test]
async fn a_set_nx_answer_of_binary_data_quoting_the_password_does_not_show_it() {
    const PASSWORD: &str = "Hv3rT8sLq2Wd6Yp1";
    let mut quoted = PASSWORD.as_bytes().to_vec();
    quoted.push(0xff);
    // `quoted` as RESP's bulk string.
    let mut reply = format!("${}\r\n", quoted.len()).into_bytes();
    reply.extend_from_slice(&quoted);
    reply.extend_from_slice(b"\r\n");
    let shown = fast_path_error(PASSWORD, reply).await;
    // The password's bytes as the driver's `Debug` of a byte vector lists them.
    for piece in PASSWORD.as_bytes().windows(8) {
        let decimal = piece
            .iter()
            .map(u8::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        assert!(
            !shown.contains(&decimal),
            "the error shows the password as decimal bytes ({decimal} is a piece of it): {shown}"
        );
    }
}

/// Reproduces a past break: a Redis server on a Unix socket (`redis+unix:///path?pass=…`, the password in the driver's `pass` parameter) that quotes the password in an error has the password shown whole in the `RedisLocker`'s error.
///
/// The locker remembered a URL's password from its user information or a
/// query parameter whose name holds `password`; the Redis driver takes
/// the password of a Unix socket URL from the parameter `pass`, which the
/// locker accepted and sent but never remembered. The fake listens on a
/// Unix socket in a directory of the test's own.
#[cfg(unix)]
#[tokio::test]
async fn a_redis_error_quoting_a_unix_socket_password_does_not_show_it() {
    use std::os::unix::net::UnixListener;
    let dir = std::env::temp_dir().join(format!("quorum-lock-unix-redis-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory for the socket");
    let path = dir.join("redis.sock");
    let listener = UnixListener::bind(&path).expect("bind the fake Redis");
    std::thread::spawn(move || {
        let got = Mutex::new(String::from("(none)"));
        for stream in listener.incoming().take(4) {
            let Ok(stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let Ok(writer) = stream.try_clone() else {
                continue;
            };
            serve_quoting_auth(BufReader::new(stream), writer, &got);
        }
    });
    let url = format!("redis+unix://{}?pass={PASSWORD}", path.display());
    let err = connect_error(&url).await;
    let _ = std::fs::remove_dir_all(&dir);
    let shown = format!("{err:?} / {err}");
    assert!(shown.contains("INFO"), "not the INFO refusal: {shown}");
    assert_no_piece(&shown, PASSWORD, 8);
}

/// The error of `fence` when a fake holding `password` answers the
/// fencing script with `kind` and `value`.
async fn fence_error(password: &str, kind: i64, value: String) -> String {
    let mut reply = format!("*2\r\n:{kind}\r\n").into_bytes();
    reply.extend(fake_redis::bulk(&value));
    let locker = checked_fake(password, reply, None).await;
    let args = LockArgs {
        uid: "holder".into(),
        resources: vec!["fenced".to_owned()].into(),
        owner: "owner".into(),
        source: "tests/redis".into(),
        quorum: 1,
    };
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        locker.fence(&args, LockMode::Write, 0),
    )
    .await
    .expect("fence ends within its timeout");
    let err = result.expect_err("the fake refuses every fencing token");
    format!("{err:?} / {err}")
}

/// Reproduces a past break: a Redis server that answers the fencing script with a refusal whose value quotes the password (or carries a terminal escape) has it shown whole, neither masked nor escaped, in the `fence` error.
///
/// docs/lock-servers.md, "Threat model": the `RedisLocker` escapes what
/// its servers say, so that a control character cannot drive the terminal
/// that shows it. The fencing script answers a kind and a value; for kind
/// 2 (a floor ahead of the clock) `fence` wrote the value into "(its
/// clock plus that is {value} ns)", and for kinds 3 and 4 it quoted the
/// value, a key, as `{:?}`; neither went through `escape_peer_text`.
#[tokio::test]
async fn a_floor_refusal_quoting_the_password_does_not_show_it() {
    const PASSWORD: &str = "Fk4sR8wQ2nY6tH3j";
    let shown = fence_error(PASSWORD, 2, format!("{PASSWORD} \u{1b}]0;pwned\u{7}")).await;
    assert!(
        shown.contains("ahead of"),
        "not the floor's refusal: {shown}"
    );
    assert!(
        !shown.contains('\u{1b}'),
        "the error carries the server's escape character raw: {shown:?}"
    );
    assert_no_piece(&shown, PASSWORD, 8);
}

/// The same for the counter's refusal (kinds 3 and 4), which quoted the
/// key it names.
#[tokio::test]
async fn a_counter_refusal_quoting_the_password_does_not_show_it() {
    const PASSWORD: &str = "Fk4sR8wQ2nY6tH3j";
    let prefix = RedisConfig::default().prefix;
    let shown = fence_error(PASSWORD, 4, format!("{prefix}{PASSWORD}")).await;
    assert!(
        shown.contains("not a token"),
        "not the counter's refusal: {shown}"
    );
    assert_no_piece(&shown, PASSWORD, 8);
}
