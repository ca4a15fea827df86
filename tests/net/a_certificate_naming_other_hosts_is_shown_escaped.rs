//! Reproduces a past break: a TLS server whose certificate (signed by the trusted CA) is for other names is named by those names as its certificate carries them, control characters included, so an escape sequence in a subject alternative name reaches `connect_error`, every failed call's reason and the warn log raw.
//!
//! The project escapes whatever a peer sends before an error or a log
//! shows it ("the server's words, escaped before any log or error shows
//! them", `escape_peer_text`; PROTOCOL.md: an escape sequence would drive
//! the terminal that shows it). `tls::server_certificate` lists the names
//! of a certificate that does not name the host (`names(presented)`) from
//! webpki's `Debug` of each name, which is `String::from_utf8_lossy` of the
//! bytes, and shows them unescaped.
//!
//! The certificate below was signed with tests/data/tls/ca-key.pem for the
//! DNS name `evil ESC ]0;pwned BEL ESC [2J x.example` (an IA5String, which
//! allows every ASCII byte); its key is public. A `LockServer` on
//! 127.0.0.1 serves it; the client trusts tests/data/tls/ca.pem and
//! connects to `127.0.0.1:PORT`. Real time (sockets), every wait bounded.
#![cfg(feature = "tls")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{
    ClientTls, LockServer, RemoteConfig, RemoteLocker, ServerConfig, ServerTls,
};
use quorum_lock::LocalLocker;

use crate::certificate_naming_other_hosts::{CERT, KEY};
use crate::loopback;
use crate::tls_files::CA;

#[tokio::test]
async fn a_certificate_naming_other_hosts_is_shown_escaped() {
    let tls = ServerTls::from_pem(CERT, KEY).expect("server tls");
    let server = LockServer::new(
        Arc::new(LocalLocker::new()),
        ServerConfig::new("client-secret").tls(tls),
    )
    .expect("valid config");
    let (bound, stop) = loopback::serve(server).await;
    let mut config = RemoteConfig::new("client-secret");
    config.connect_timeout = Duration::from_secs(2);
    config.tls = Some(ClientTls::new(CA).expect("client tls"));
    let locker = tokio::time::timeout(
        Duration::from_secs(10),
        RemoteLocker::connect(format!("127.0.0.1:{}", bound.port()), config),
    )
    .await
    .expect("connect ends within its timeout")
    .expect("an offline locker, not an error");
    let shown = locker.connect_error().map(|e| e.to_string());
    drop(locker);
    drop(stop);
    let shown = shown.expect("the certificate names another host");
    assert!(
        shown.contains("x.example"),
        "the certificate's names are listed: {shown:?}"
    );
    assert!(
        !shown.chars().any(|c| c.is_control()),
        "the certificate's names reach the error with their control characters (an escape \
         sequence that retitles and clears the terminal showing it): {shown:?}"
    );
}
