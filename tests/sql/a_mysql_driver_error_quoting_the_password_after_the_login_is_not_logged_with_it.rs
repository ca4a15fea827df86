//! Reproduces a past break: a MySQL server that lets the login through and then refuses the locker's first statement quoting the password has the password logged whole by the driver's pool (`error returned from after_connect`), since a MySQL locker holds none of the driver's events.
//!
//! docs/sql.md, "Credentials and TLS": user and password "are never shown:
//! `endpoint()`, errors, logs and `Debug`", and "A password the database
//! quotes back (in a login refusal, say) is not shown either: any run of 8
//! or more of its bytes in text the database sends is shown as `***`";
//! while the locker's calls drive the driver, "any other event of the
//! driver's whose words quote a secret (a database error it logs, say)"
//! is held and logged masked. docs/lock-servers.md, threat model: any run
//! of 8 or more bytes of "the password of a Redis or database URL" in text
//! a peer sends is shown as `***`.
//!
//! What happens instead: the locker's pool runs its session statements
//! (`SET SESSION TRANSACTION ISOLATION LEVEL ...`) in the driver's
//! `after_connect` hook; when one fails, the driver (sqlx 0.8,
//! `pool/inner.rs`) logs the error, the server's words and all, at ERROR,
//! `error returned from after_connect`, in the caller's task, once per
//! attempt of the pool. The PostgreSQL locker masks such an event; the
//! MySQL locker has no masking dispatcher at all (`Masking::new(..,
//! false)`: "a MySQL locker, whose driver logs no server text"), so the
//! application's log gets the password, while the locker's own error
//! masks it. A hostile MySQL server learns the password from
//! `caching_sha2_password`'s full authentication over a connection without
//! TLS (the client encrypts it with a public key the server hands it);
//! this fake simply knows it.
//!
//! The server is a fake on a loopback port speaking just enough of the
//! MySQL protocol (no database needed): a handshake without TLS or an
//! authentication plugin, an OK to the login and to the driver's own
//! `SET sql_mode=...`, and an error quoting the password to every other
//! statement. One thread, a bounded number of connections, every read
//! bounded in time.
#![cfg(feature = "mysql")]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};

use crate::log_capture::Capture;

/// The password in the URL.
const PASSWORD: &str = "Hq4pW7zT2mN9xB6k";

/// Reads one packet: its sequence id and body.
fn read_packet(stream: &mut TcpStream) -> Option<(u8, Vec<u8>)> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).ok()?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
    if len > 1 << 16 {
        return None;
    }
    let mut body = vec![0; len];
    stream.read_exact(&mut body).ok()?;
    Some((header[3], body))
}

/// A packet of `body` with sequence id `seq`.
fn packet(seq: u8, body: &[u8]) -> Vec<u8> {
    let len = u32::try_from(body.len()).expect("a small packet").to_le_bytes();
    let mut out = vec![len[0], len[1], len[2], seq];
    out.extend(body);
    out
}

/// An OK packet's body.
fn ok() -> Vec<u8> {
    vec![0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00]
}

/// The server's handshake: protocol 10, no TLS, no authentication plugin.
fn handshake() -> Vec<u8> {
    // CLIENT_LONG_PASSWORD (MySQL), PROTOCOL_41, TRANSACTIONS,
    // SECURE_CONNECTION.
    let caps: u32 = 1 | 512 | 8192 | (1 << 15);
    let mut body = vec![10];
    body.extend(b"8.0.36\0");
    body.extend(7u32.to_le_bytes());
    body.extend(b"abcdefgh");
    body.push(0);
    body.extend(&caps.to_le_bytes()[..2]);
    body.push(45); // utf8mb4_general_ci
    body.extend(2u16.to_le_bytes());
    body.extend(&caps.to_le_bytes()[2..]);
    body.push(0);
    body.extend([0u8; 6]);
    body.extend([0u8; 4]);
    body.extend(b"ijklmnopqrst");
    body.push(0);
    body
}

/// Serves one connection: the login goes through, the driver's own
/// `SET sql_mode` is answered OK, every other statement is refused with
/// an error quoting the password.
fn serve_one(mut stream: TcpStream) -> Option<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(&packet(0, &handshake())).ok()?;
    let (seq, _response) = read_packet(&mut stream)?;
    stream.write_all(&packet(seq.wrapping_add(1), &ok())).ok()?;
    // Bounded: a few statements at most before the driver gives up.
    for _ in 0..64 {
        let (seq, body) = read_packet(&mut stream)?;
        match body.first() {
            Some(0x03) if body[1..].starts_with(b"SET sql_mode") => {
                stream.write_all(&packet(seq.wrapping_add(1), &ok())).ok()?;
            }
            Some(0x03) => {
                let mut err = vec![0xff];
                err.extend(1227u16.to_le_bytes());
                err.extend(b"#42000");
                err.extend(
                    format!("Access denied for a session logged in with '{PASSWORD}'").as_bytes(),
                );
                stream.write_all(&packet(seq.wrapping_add(1), &err)).ok()?;
            }
            Some(0x01) | None => return Some(()),
            Some(_) => {
                stream.write_all(&packet(seq.wrapping_add(1), &ok())).ok()?;
            }
        }
    }
    Some(())
}

#[tokio::test]
async fn a_mysql_driver_error_quoting_the_password_after_the_login_is_not_logged_with_it() {
    let (logs, _guard) = Capture::install();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake MySQL");
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
    let url = format!("mysql://app:{PASSWORD}@{addr}/locks?ssl-mode=disabled");
    let result = tokio::time::timeout(Duration::from_secs(20), SqlLocker::connect(&url, config))
        .await
        .expect("connect ends within its timeout");
    let err = match result {
        Ok(_) => panic!("the fake MySQL at {addr} was accepted"),
        Err(err) => err,
    };
    let lines = logs.lines();
    // The fake was reached and refused a statement: the locker's error or
    // the logs say so (whether the driver's line is kept or not).
    let said = format!("{err} {lines:?}");
    assert!(
        said.contains("Access denied"),
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
