//! Reproduces a past break: an HTTP request sent to a lock server with the server's admin token in its request line (a health check pointed at the wrong port, its token in the query) has the token logged by the server at `warn`.
//!
//! docs/lock-servers.md, "Threat model": peer text the library shows has
//! "any run of 8 or more bytes of a secret the process handed a locker"
//! shown as `***`; docs/cli.md: the server "logs at `warn` ... a client
//! that speaks another protocol (TLS at a plain server, Redis, HTTP)".
//! That line quotes the first 40 characters of the peer's first line, and
//! the tokens a server is given are never remembered for masking (only
//! those a client hands its `RemoteLocker` are): a probe or proxy
//! misconfigured with the admin token in its URL puts the token in the
//! server's log, for whoever reads it, whereas the same text quoted back
//! to a client would be masked.
//!
//! A server with an admin token on 127.0.0.1; a peer sends one HTTP
//! request line carrying it and waits to be closed. Real time (sockets),
//! every wait bounded.
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
const ADMIN: &str = "Zq7pW2xK9mN4vB8c";

// The server's tasks run on this test's thread (a current-thread
// runtime), where the capture is the default subscriber.
#[tokio::test]
async fn an_http_probe_carrying_the_admin_token_is_not_logged_with_it() {
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

    let mut probe = TcpStream::connect(bound).await.expect("connect");
    probe
        .write_all(format!("GET /?t={ADMIN} HTTP/1.1\r\nHost: locks\r\n\r\n").as_bytes())
        .await
        .expect("send the request");
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), probe.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the probe was not closed");
    tokio::time::sleep(Duration::from_millis(50)).await;

    let lines = capture.lines();
    assert!(
        lines.iter().any(|line| line.contains("HTTP")),
        "the probe was not logged: {lines:#?}"
    );
    for line in &lines {
        for piece in ADMIN.as_bytes().windows(8) {
            let piece = std::str::from_utf8(piece).expect("ascii");
            assert!(
                !line.contains(piece),
                "a log line shows the admin token ({piece} is a piece of it): {line}"
            );
        }
    }
}
