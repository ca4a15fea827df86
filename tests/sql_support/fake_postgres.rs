//! A fake PostgreSQL on a loopback port that refuses every login with a
//! message quoting the cleartext password it was sent (SQLSTATE 28P01),
//! for the tests that check a password quoted back is never shown. It
//! speaks just enough of the protocol: declines TLS, asks for a cleartext
//! password, refuses it. One thread, a bounded number of connections,
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

/// Serves one login: declines an `SSLRequest`, reads the startup message,
/// asks for a cleartext password, and refuses what comes, quoting it.
fn serve_one(mut stream: TcpStream) -> Option<()> {
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

/// Starts the fake; its address.
pub fn refusing_logins() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake PostgreSQL");
    let addr = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        // Bounded: a connect makes a few attempts at most.
        for stream in listener.incoming().take(8) {
            let Ok(stream) = stream else { continue };
            let _ = serve_one(stream);
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
