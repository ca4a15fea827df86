//! Reproduces a past break: a server whose first answer is the bytes of a non-ASCII secret the process holds (a lock server's admin token of Cyrillic letters) is named by those bytes in hex, eight of them, in the client's error, where no masking looks.
//!
//! docs/lock-servers.md, "Threat model": "Every piece of text a peer sends
//! that the library shows ... is escaped, and any run of 8 or more bytes of
//! a secret the process holds for its lockers (..., a lock server's own
//! tokens, ...) is shown as `***`." A client whose server answers bytes
//! that are not the lock protocol says so, and when they do not start as
//! text (a byte outside printable ASCII in the first four) it quotes the
//! first eight in hex (`sniff::answer_from_server`, `Foreign::Binary`).
//! Masking (`secrets::covered`) is applied to the text line only, and the
//! check for what the client sent looks for its own token only: a secret
//! of the process that is not ASCII (every byte of a Cyrillic letter is
//! outside printable ASCII) reaches the error, eight bytes in hex, which
//! whoever reads it decodes at once.
//!
//! One process serves a lock server with a Cyrillic admin token (which it
//! remembers for masking) and is a client of a fake server on 127.0.0.1
//! that answers the handshake with the admin token's bytes. Real time
//! (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::LocalLocker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const ADMIN: &str = "секретныйадминключ";

#[tokio::test]
async fn a_server_answering_a_non_ascii_secret_in_binary_is_not_shown_it() {
    // The process's own lock server: its tokens are remembered.
    let _server = LockServer::new(
        Arc::new(LocalLocker::new()),
        ServerConfig::new("client-token-of-this-server").admin_token(ADMIN),
    )
    .expect("valid config");

    // A server that answers the handshake with the admin token's bytes.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("its address");
    let fake = tokio::spawn(async move {
        let Ok(Ok((mut stream, _))) =
            tokio::time::timeout(Duration::from_secs(10), listener.accept()).await
        else {
            return;
        };
        let mut hello = [0u8; 64];
        let _ = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut hello)).await;
        let _ = stream.write_all(ADMIN.as_bytes()).await;
        let _ = stream.flush().await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    });

    let mut config = RemoteConfig::new("another-client-token");
    config.connect_timeout = Duration::from_secs(3);
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        RemoteLocker::connect(addr.to_string(), config),
    )
    .await
    .expect("connect ends within its timeout");
    let _ = fake.await;
    // Whether the connect fails or the locker goes on in the background,
    // the error says why.
    let err = match result {
        Err(err) => err,
        Ok(locker) => locker
            .connect_error()
            .expect("the fake server was taken for a lock server"),
    };
    let shown = format!("{err:?} / {err}");
    assert!(
        shown.contains("not the lock protocol"),
        "not the error about the answer: {shown}"
    );
    for piece in ADMIN.as_bytes().windows(8) {
        let hex: Vec<String> = piece.iter().map(|b| format!("{b:02x}")).collect();
        let hex = hex.join(" ");
        assert!(
            !shown.contains(&hex),
            "the error shows 8 bytes of the admin token in hex ({hex}): {shown}"
        );
    }
}
