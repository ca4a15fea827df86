//! Reproduces a past break: a peer whose first line quotes a lock server's token of non-ASCII letters (`AUTH <token>`, a Redis client pointed at the lock server) has the token logged by the server, every byte of it as a `\xNN` escape, since the quoted line is escaped before it is masked.
//!
//! docs/lock-servers.md, "Threat model": every piece of text a peer sends
//! that the library shows is escaped, "and any run of 8 or more bytes of
//! a secret the process holds for its lockers (..., a lock server's own
//! tokens, ...) is shown as `***`". The server's line about a peer that
//! speaks no lock protocol quotes its first line with every byte outside
//! printable ASCII written `\xNN`, and masks only afterwards, comparing
//! with the secret as written and as `Debug` escapes it: a token of
//! Cyrillic letters (or any whose every run of 8 bytes holds a non-ASCII
//! letter) matches neither, and its bytes reach the log in hex, which
//! whoever reads the log decodes at once.
//!
//! A server with a Cyrillic admin token on 127.0.0.1; a peer sends one
//! line `AUTH <token>` and waits to be closed. Real time (sockets), every
//! wait bounded.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use crate::log_capture::Capture;
use quorum_lock::net::{LockServer, ServerConfig};
use quorum_lock::LocalLocker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

const TOKEN: &str = "client-secret";
const ADMIN: &str = "секретныйключ";

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

#[tokio::test]
async fn a_peer_quoting_a_servers_non_ascii_token_is_not_logged_with_it() {
    let (capture, _guard) = Capture::install();
    let config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    let server = LockServer::new(Arc::new(LocalLocker::new()), config).expect("valid config");
    let (_stop, stopped) = oneshot::channel::<()>();
    let (bound, serve) = server
        .bind("127.0.0.1:0".parse().expect("an address"), async {
            let _ = stopped.await;
        })
        .await
        .expect("bind loopback");
    tokio::spawn(serve);

    let mut peer = TcpStream::connect(bound).await.expect("connect");
    peer.write_all(format!("AUTH {ADMIN}\r\n").as_bytes())
        .await
        .expect("send the line");
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), peer.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the peer was not closed");
    tokio::time::sleep(Duration::from_millis(50)).await;

    let lines = capture.lines();
    assert!(
        lines.iter().any(|line| line.contains("AUTH")),
        "the peer's line was not logged: {lines:#?}"
    );
    for line in &lines {
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
