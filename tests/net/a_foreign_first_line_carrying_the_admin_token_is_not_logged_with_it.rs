//! A peer that speaks another protocol and carries the lock server's admin
//! token in its first line (a Redis client's `AUTH`, a health check's URL)
//! does not get the token into the server's log. docs/lock-servers.md,
//! "Threat model": every piece of text a peer sends that the library shows
//! is escaped, "and any run of 8 or more bytes of a secret the process
//! holds for its lockers (..., a lock server's own tokens, ...) is shown
//! as `***`"; docs/cli.md: the server "logs at `warn` ... a client that
//! speaks another protocol (TLS at a plain server, Redis, HTTP)", quoting
//! the first 40 characters of its first line.
//!
//! Each scene: a server with an admin token on 127.0.0.1; a peer sends one
//! line carrying it and waits to be closed. The server's tasks run on the
//! test's thread (a current-thread runtime), where the capture is the
//! default subscriber. Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use crate::log_capture::Capture;
use crate::loopback;
use quorum_lock::net::{LockServer, ServerConfig};
use quorum_lock::LocalLocker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TOKEN: &str = "client-secret";

/// The server's log lines once a peer sent `line` to a server of admin
/// token `admin` and was closed; they must quote the line (`quoted` is a
/// word of it).
async fn logged_after(admin: &str, line: &str, quoted: &str) -> Vec<String> {
    let (capture, _guard) = Capture::install();
    let config = ServerConfig::new(TOKEN).admin_token(admin);
    let server = LockServer::new(Arc::new(LocalLocker::new()), config).expect("valid config");
    let (bound, _stop) = loopback::serve(server).await;

    let mut peer = TcpStream::connect(bound).await.expect("connect");
    peer.write_all(line.as_bytes())
        .await
        .expect("send the line");
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), peer.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the peer was not closed");
    tokio::time::sleep(Duration::from_millis(50)).await;

    let lines = capture.lines();
    assert!(
        lines.iter().any(|l| l.contains(quoted)),
        "the peer's line was not logged: {lines:#?}"
    );
    lines
}

/// Reproduces a past break: an HTTP request sent to a lock server with the server's admin token in its request line (a health check pointed at the wrong port, its token in the query) has the token logged by the server at `warn`.
///
/// The tokens a server is given were never remembered for masking (only
/// those a client hands its `RemoteLocker` were), whereas the same text
/// quoted back to a client would be masked.
#[tokio::test]
async fn an_http_probe_carrying_the_admin_token_is_not_logged_with_it() {
    const ADMIN: &str = "Zq7pW2xK9mN4vB8c";
    let probe = format!("GET /?t={ADMIN} HTTP/1.1\r\nHost: locks\r\n\r\n");
    for line in logged_after(ADMIN, &probe, "HTTP").await {
        for piece in ADMIN.as_bytes().windows(8) {
            let piece = std::str::from_utf8(piece).expect("ascii");
            assert!(
                !line.contains(piece),
                "a log line shows the admin token ({piece} is a piece of it): {line}"
            );
        }
    }
}

/// `bytes` as the server's quote writes bytes outside printable ASCII.
fn hex_escaped(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| match b {
            0x20..=0x7e => char::from(*b).to_string(),
            b => format!("\\x{b:02x}"),
        })
        .collect()
}

/// Reproduces a past break: a peer whose first line quotes a lock server's token of non-ASCII letters (`AUTH <token>`, a Redis client pointed at the lock server) has the token logged by the server, every byte of it as a `\xNN` escape, since the quoted line is escaped before it is masked.
///
/// The masking compared with the secret as written and as `Debug` escapes
/// it: a token of Cyrillic letters (or any whose every run of 8 bytes
/// holds a non-ASCII letter) matched neither, and its bytes reached the
/// log in hex, which whoever reads the log decodes at once.
#[tokio::test]
async fn a_peer_quoting_a_servers_non_ascii_token_is_not_logged_with_it() {
    const ADMIN: &str = "секретныйключ";
    for line in logged_after(ADMIN, &format!("AUTH {ADMIN}\r\n"), "AUTH").await {
        for piece in ADMIN.as_bytes().windows(8) {
            let escaped = hex_escaped(piece);
            let raw = String::from_utf8_lossy(piece);
            assert!(
                !line.contains(&escaped) && !line.contains(&*raw),
                "a log line shows the admin token ({escaped} is a piece of it): {line}"
            );
        }
    }
}
