//! Reproduces a past break: a PostgreSQL server that sends a notice quoting the password it was sent has the password logged whole (the driver logs notices, target `sqlx::postgres::notice`).
//!
//! docs/sql.md, "Credentials and TLS": user and password "are never shown:
//! `endpoint()`, errors, logs and `Debug`", and "A password the database
//! quotes back (in a login refusal, say) is not shown either: any run of 8
//! or more of its bytes in text the database sends is shown as `***`."
//! The masking is applied to the words the locker puts in its errors; the
//! PostgreSQL driver (sqlx) logs every `NoticeResponse` the server sends,
//! as the server wrote it, through `tracing` in the application's process
//! (a warning at WARN), where nothing masks it. A hostile server, or
//! without TLS anyone answering in its place, puts the password it was
//! sent in the application's logs.
//!
//! The server is a fake on a loopback port speaking just enough of the
//! PostgreSQL protocol (no database needed): it declines TLS, asks for a
//! cleartext password, sends a warning quoting it, then refuses the login.
//! One thread, a bounded number of connections, every read bounded in time.
#![cfg(feature = "postgres")]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};

use crate::log_capture::Capture;

/// The password in the URL.
const PASSWORD: &str = "Zq7pW2xK9mN4vB8c";

/// Reads one length-prefixed message body (after its type byte, if any).
fn read_body(stream: &mut std::net::TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).ok()?;
    let len = u32::from_be_bytes(len) as usize;
    if !(4..=1 << 16).contains(&len) {
        return None;
    }
    let mut body = vec![0; len - 4];
    stream.read_exact(&mut body).ok()?;
    Some(body)
}

/// Serves one login: declines an `SSLRequest`, reads the startup message,
/// asks for a cleartext password, and refuses what comes, quoting it.
fn serve_one(mut stream: std::net::TcpStream) -> Option<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut first = read_body(&mut stream)?;
    // SSLRequest (or GSSENCRequest): declined, then the startup message.
    if first.len() == 4 && first[..2] == [0x04, 0xd2] {
        stream.write_all(b"N").ok()?;
        first = read_body(&mut stream)?;
    }
    let _startup = first;
    // AuthenticationCleartextPassword.
    stream.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 3]).ok()?;
    let mut kind = [0u8; 1];
    stream.read_exact(&mut kind).ok()?;
    let password = read_body(&mut stream)?;
    let password = String::from_utf8_lossy(&password)
        .trim_end_matches('\0')
        .to_owned();
    // A notice quoting it first, as a server's warning.
    stream
        .write_all(&message(
            b'N',
            &[
                (b'S', "WARNING".to_owned()),
                (b'V', "WARNING".to_owned()),
                (b'C', "01000".to_owned()),
                (
                    b'M',
                    format!("login attempt for user \"app\" with password \"{password}\""),
                ),
            ],
        ))
        .ok()?;
    let mut fields = Vec::new();
    for (code, value) in [
        (b'S', "FATAL".to_owned()),
        (b'V', "FATAL".to_owned()),
        (b'C', "28P01".to_owned()),
        (
            b'M',
            format!("password authentication failed for user \"app\": got \"{password}\""),
        ),
    ] {
        fields.push(code);
        fields.extend(value.as_bytes());
        fields.push(0);
    }
    fields.push(0);
    let mut out = vec![b'E'];
    out.extend(((fields.len() + 4) as u32).to_be_bytes());
    out.extend(fields);
    stream.write_all(&out).ok()?;
    Some(())
}

/// A backend message of type `kind` made of the error or notice `fields`.
fn message(kind: u8, fields: &[(u8, String)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (code, value) in fields {
        body.push(*code);
        body.extend(value.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut out = vec![kind];
    out.extend(((body.len() + 4) as u32).to_be_bytes());
    out.extend(body);
    out
}

#[tokio::test]
async fn a_notice_quoting_the_password_is_not_logged_with_it() {
    let (logs, _guard) = Capture::install();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake PostgreSQL");
    let addr = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        // Bounded: a connect makes a few attempts at most.
        for stream in listener.incoming().take(8) {
            let Ok(stream) = stream else { continue };
            let _ = serve_one(stream);
        }
    });
    let config = SqlConfig {
        call_timeout: Duration::from_secs(3),
        ..SqlConfig::default()
    };
    let url = format!("postgres://app:{PASSWORD}@{addr}/locks?sslmode=disable");
    let result = tokio::time::timeout(Duration::from_secs(20), SqlLocker::connect(&url, config))
        .await
        .expect("connect ends within its timeout");
    assert!(
        result.is_err(),
        "the fake PostgreSQL at {addr} was accepted"
    );
    let lines = logs.lines();
    assert!(
        lines.iter().any(|line| line.contains("login attempt")),
        "the notice was not logged: {lines:#?}"
    );
    for line in &lines {
        for piece in PASSWORD.as_bytes().windows(8) {
            let piece = std::str::from_utf8(piece).expect("ascii");
            assert!(
                !line.contains(piece),
                "a log line shows the password ({piece} is a piece of it): {line}"
            );
        }
    }
}
