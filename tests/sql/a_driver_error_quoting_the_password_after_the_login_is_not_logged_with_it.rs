//! Reproduces a past break: a PostgreSQL server that lets the login through and then refuses the locker's first statement quoting the password has the password logged whole by the driver's pool (`error returned from after_connect`), from within the locker's own call.
//!
//! docs/sql.md, "Credentials and TLS": user and password "are never shown:
//! `endpoint()`, errors, logs and `Debug`", and "A password the database
//! quotes back (in a login refusal, say) is not shown either: any run of 8
//! or more of its bytes in text the database sends is shown as `***`."
//! The section then says how the driver's notices are held and logged
//! masked while the locker's calls drive the driver; the only gap it
//! names is a notice read in the driver's own pool task.
//!
//! What happens instead: the locker's pool runs its statements in the
//! driver's `after_connect` hook (`src/sql/store.rs`); when one fails, the
//! driver (sqlx 0.8, `pool/inner.rs`) logs the error, server's words and
//! all, at ERROR, target `sqlx::pool::inner`, `error returned from
//! after_connect`, in the caller's task, within the locker's masked poll.
//! The masking dispatcher holds only the target `sqlx::postgres::notice`
//! and passes this event on unchanged, so the application's logs get the
//! password, while the locker's own error masks it.
//!
//! The server is a fake on a loopback port speaking just enough of the
//! PostgreSQL protocol (no database needed): it declines TLS, asks for a
//! cleartext password, lets the login through, and answers the first
//! statement with an error quoting the password. One thread, a bounded
//! number of connections, every read bounded in time.
#![cfg(feature = "postgres")]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};

use crate::log_capture::Capture;

/// The password in the URL.
const PASSWORD: &str = "Tg8nV3cQ6rK1yM5w";

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

/// A backend message of type `kind` with `body`.
fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend(((body.len() + 4) as u32).to_be_bytes());
    out.extend(body);
    out
}

/// The body of an error or notice made of `fields`.
fn fields(fields: &[(u8, String)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (code, value) in fields {
        body.push(*code);
        body.extend(value.as_bytes());
        body.push(0);
    }
    body.push(0);
    body
}

/// Serves one connection: declines an `SSLRequest`, asks for a cleartext
/// password, lets the login through, and answers every statement (a simple
/// query, or an extended one at its `Sync`) with an error quoting the
/// password.
fn serve_one(mut stream: std::net::TcpStream) -> Option<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut first = read_body(&mut stream)?;
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
    // AuthenticationOk, the server's version, its key, ready.
    let mut welcome = message(b'R', &[0, 0, 0, 0]);
    welcome.extend(message(b'S', b"server_version\x0016.0\x00"));
    welcome.extend(message(b'K', &[0, 0, 0, 7, 0, 0, 0, 9]));
    welcome.extend(message(b'Z', b"I"));
    stream.write_all(&welcome).ok()?;
    // Bounded: a few statements at most before the driver gives up.
    for _ in 0..64 {
        stream.read_exact(&mut kind).ok()?;
        let _body = read_body(&mut stream)?;
        match kind[0] {
            b'Q' | b'S' => {
                let mut reply = message(
                    b'E',
                    &fields(&[
                        (b'S', "ERROR".to_owned()),
                        (b'V', "ERROR".to_owned()),
                        (b'C', "42501".to_owned()),
                        (
                            b'M',
                            format!(
                                "permission denied for a session logged in with \"{password}\""
                            ),
                        ),
                    ]),
                );
                reply.extend(message(b'Z', b"I"));
                stream.write_all(&reply).ok()?;
            }
            b'X' => return Some(()),
            _ => {}
        }
    }
    Some(())
}

#[tokio::test]
async fn a_driver_error_quoting_the_password_after_the_login_is_not_logged_with_it() {
    let (logs, _guard) = Capture::install();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake PostgreSQL");
    let addr = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        // Bounded: the pool tries again within the call timeout only.
        for stream in listener.incoming().take(64) {
            let Ok(stream) = stream else { continue };
            let _ = serve_one(stream);
        }
    });
    let config = SqlConfig {
        call_timeout: Duration::from_secs(2),
        ..SqlConfig::default()
    };
    let url = format!("postgres://app:{PASSWORD}@{addr}/locks?sslmode=disable");
    let result = tokio::time::timeout(Duration::from_secs(20), SqlLocker::connect(&url, config))
        .await
        .expect("connect ends within its timeout");
    let err = match result {
        Ok(_) => panic!("the fake PostgreSQL at {addr} was accepted"),
        Err(err) => err,
    };
    let lines = logs.lines();
    // The fake was reached and refused a statement: the locker's error or
    // the logs say so (whether the driver's line is kept or not).
    let said = format!("{err} {lines:?}");
    assert!(
        said.contains("permission denied"),
        "the server's refusal is nowhere (error: {err}): {lines:#?}"
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
