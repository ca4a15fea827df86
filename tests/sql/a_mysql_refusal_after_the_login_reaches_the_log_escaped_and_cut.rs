//! Reproduces a past break: a MySQL server that lets the login through and then refuses the locker's first statement with a megabyte of escape sequences and line breaks has it logged raw and whole by the driver's pool, once per attempt of the pool within one call.
//!
//! docs/sql.md, "Credentials and TLS": "A database's own words in an error
//! (a refusal's message) are escaped: control characters, line breaks and
//! bidirectional overrides show as `\u{1b}`, `\n`, `\u{202e}`, so that a
//! hostile server's text cannot drive the terminal that shows the error or
//! a log." And the rustdoc of `escape_peer_text` (src/locker/args.rs): a
//! peer's text in an error or log line is cut to 2 KiB, "and all a hostile
//! peer can put into one line however long its message".
//!
//! What happens instead: the locker's pool runs its session statements in
//! the driver's `after_connect` hook; when one fails, the driver (sqlx
//! 0.8, `pool/inner.rs`) logs the error at ERROR, `error returned from
//! after_connect`, with the server's message as it came, in the caller's
//! task, and tries again (backoff from 10 ms, doubling) until the call
//! timeout: several such lines per call. A MySQL locker has no masking
//! dispatcher at all, so nothing escapes or cuts them: the application's
//! log gets the escape sequences (a terminal title, a screen clear), a
//! forged line after the line break, and a megabyte per line.
//!
//! The server is a fake on a loopback port (`sql_support/fake_mysql.rs`)
//! that lets the login through and answers every statement after the
//! driver's own with such an error.
#![cfg(feature = "mysql")]

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};

use crate::fake_mysql;
use crate::log_capture::Capture;

/// How the refusal begins: a terminal title, a screen clear, a line
/// break, a forged line and a bidirectional override.
const HEAD: &str = "denied\u{1b}]0;owned\u{7}\u{1b}[2J\n2026-12-01T00:00:00Z ERROR forged \u{202e}";

/// How many bytes of U+0001 follow: a megabyte, within one packet.
const TAIL: usize = 1 << 20;

/// A generous bound on one log line quoting a database's refusal: far
/// more than the 2 KiB of it a line may show, far less than the message.
const LINE_BOUND: usize = 64 << 10;

#[tokio::test]
async fn a_mysql_refusal_after_the_login_reaches_the_log_escaped_and_cut() {
    let (logs, _guard) = Capture::install();
    let mut message = HEAD.as_bytes().to_vec();
    message.extend(std::iter::repeat_n(0x01, TAIL));
    let addr = fake_mysql::refusing_statements(message);
    let config = SqlConfig {
        call_timeout: Duration::from_secs(2),
        ..SqlConfig::default()
    };
    let url = format!("mysql://app:Rw5tY8uI1oP3aS6d@{addr}/locks?ssl-mode=disabled");
    let result = tokio::time::timeout(Duration::from_secs(20), SqlLocker::connect(&url, config))
        .await
        .expect("connect ends within its timeout");
    let err = match result {
        Ok(_) => panic!("the fake MySQL at {addr} was accepted"),
        Err(err) => err,
    };
    let lines = logs.lines();
    let said = format!("{err} {}", lines.join(" "));
    assert!(
        said.contains("denied"),
        "the server's refusal is nowhere (error: {err})"
    );
    let quoting: Vec<&String> = lines.iter().filter(|l| l.contains("denied")).collect();
    for line in &quoting {
        let head: String = line.chars().take(300).collect();
        assert!(
            !line.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "a log line ({} such lines) quotes the database's refusal unescaped: {head:?}",
            quoting.len()
        );
        assert!(
            line.len() <= LINE_BOUND,
            "a log line ({} such lines) quotes the database's refusal whole: {} bytes; it \
             begins: {head:?}",
            quoting.len(),
            line.len()
        );
    }
}
