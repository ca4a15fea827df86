//! A fake PostgreSQL on a loopback port that quotes back the cleartext
//! password it was sent: in its refusal of every login (SQLSTATE 28P01),
//! in a notice before it, or in its error to every statement after a
//! login it let through; for the tests that check a password quoted back
//! is never shown. It speaks just enough of the protocol: declines TLS,
//! asks for a cleartext password, goes on as its script says. One thread, a bounded number of connections,
//! every read bounded in time. Not every test that includes it uses all
//! of it.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};

/// Reads one length-prefixed message body (after its type byte, if any).
fn read_body(stream: &mut TcpStream) -> Option<Vec<u8>> {
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

/// What the fake does once it has the password.
#[derive(Clone, Copy)]
pub enum Script {
    /// Refuses the login, quoting the password (SQLSTATE 28P01).
    Refuse,
    /// Sends a warning notice quoting the password, then refuses.
    NoticeThenRefuse,
    /// Lets the login through and answers every statement (a simple query,
    /// or an extended one at its `Sync`) with an error quoting the
    /// password (SQLSTATE 42501).
    FailStatements,
}

/// A backend message of type `kind` made of the error or notice `fields`.
fn fields_message(kind: u8, fields: &[(u8, String)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (code, value) in fields {
        body.push(*code);
        body.extend(value.as_bytes());
        body.push(0);
    }
    body.push(0);
    message(kind, &body)
}

/// A backend message of type `kind` with `body`.
fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend(((body.len() + 4) as u32).to_be_bytes());
    out.extend(body);
    out
}

/// Serves one connection: declines an `SSLRequest`, reads the startup
/// message, asks for a cleartext password, and goes on as `script` says.
fn serve_one(mut stream: TcpStream, script: Script) -> Option<()> {
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
    let refusal = fields_message(
        b'E',
        &[
            (b'S', "FATAL".to_owned()),
            (b'V', "FATAL".to_owned()),
            (b'C', "28P01".to_owned()),
            (
                b'M',
                format!("password authentication failed for user \"app\": got \"{password}\""),
            ),
        ],
    );
    match script {
        Script::Refuse => stream.write_all(&refusal).ok(),
        Script::NoticeThenRefuse => {
            let mut out = fields_message(
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
            );
            out.extend(refusal);
            stream.write_all(&out).ok()
        }
        Script::FailStatements => {
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
                        let mut reply = fields_message(
                            b'E',
                            &[
                                (b'S', "ERROR".to_owned()),
                                (b'V', "ERROR".to_owned()),
                                (b'C', "42501".to_owned()),
                                (
                                    b'M',
                                    format!(
                                        "permission denied for a session logged in with \"{password}\""
                                    ),
                                ),
                            ],
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
    }
}

/// Starts the fake, refusing every login; its address.
pub fn refusing_logins() -> SocketAddr {
    serving(Script::Refuse)
}

/// Starts the fake with `script`; its address. It serves at most 64
/// connections (a connect makes a few attempts; a pool whose first
/// statement fails tries again within its call timeout).
pub fn serving(script: Script) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake PostgreSQL");
    let addr = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        for stream in listener.incoming().take(64) {
            let Ok(stream) = stream else { continue };
            let _ = serve_one(stream, script);
        }
    });
    addr
}

/// What a `SqlLocker` connecting with `url` (to a fake at `addr`) shows of
/// its error, `Debug` and `Display`, checked to be the refusal.
pub async fn refusal_shown(url: &str, addr: SocketAddr) -> String {
    let config = SqlConfig {
        call_timeout: Duration::from_secs(3),
        ..SqlConfig::default()
    };
    let result = tokio::time::timeout(Duration::from_secs(20), SqlLocker::connect(url, config))
        .await
        .expect("connect ends within its timeout");
    let err = match result {
        Ok(_) => panic!("the fake PostgreSQL at {addr} was accepted"),
        Err(err) => err,
    };
    let shown = format!("{err:?} / {err}");
    assert!(
        shown.contains("28P01") || shown.contains("credentials"),
        "not the refusal: {shown}"
    );
    shown
}

/// Fails when `shown` holds a run of `run` bytes of `password`.
pub fn assert_not_shown(password: &str, shown: &str, run: usize) {
    for piece in password.as_bytes().windows(run) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        assert!(
            !shown.contains(piece),
            "the error shows the password ({piece} is a piece of it): {shown}"
        );
    }
}
