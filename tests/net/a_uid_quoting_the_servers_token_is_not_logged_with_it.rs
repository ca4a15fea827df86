//! Reproduces a past break: a client whose lock uid quotes the server's admin token has it logged by the server whole (at `debug`, when a refresh in the quarantine re-creates its entries), where every other piece of peer text the server logs has the server's tokens masked.
//!
//! docs/lock-servers.md, "Threat model": any run of 8 or more bytes of a
//! secret the process holds for its lockers, "a lock server's own tokens"
//! among them, in text a peer sends that the library shows, is shown as
//! `***` (the server masks its tokens in a peer's first line it logs, as
//! `a_foreign_first_line_carrying_the_admin_token_is_not_logged_with_it` checks).
//! The uid of a request is a peer's text too, up to 128 bytes of anything
//! printable, and the lock table logs it as it came ("re-created entries
//! on refresh in quarantine", uid = ...): a client configured with the
//! admin token in the wrong field, or a proxy rewriting uids, puts the
//! admin token in the server's log for whoever reads it.
//!
//! A server whose lock table is in its quarantine (60 s from a restart);
//! a client refreshes, in write mode, a lock whose uid quotes the admin
//! token, and the server re-creates its entry and logs the uid. Real time
//! (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use crate::log_capture::Capture;
use crate::loopback;
use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LocalLocker, LockArgs, LockMode, LockerConfig, NetLocker};

const TOKEN: &str = "client-secret";
const ADMIN: &str = "Hq3vN8pL5xR2mT6w";

// The server's tasks run on this test's thread (a current-thread
// runtime), where the capture is the default subscriber.
#[tokio::test]
async fn a_uid_quoting_the_servers_token_is_not_logged_with_it() {
    let (capture, _guard) = Capture::install();
    let locker = LocalLocker::with_config(
        "node",
        LockerConfig {
            quarantine: Duration::from_secs(60),
            ..LockerConfig::default()
        },
    );
    // As after a restart: the quarantine begins.
    locker.restart();
    let config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    let server = LockServer::new(Arc::new(locker), config).expect("valid config");
    let (bound, _stop) = loopback::serve(server).await;

    let client = tokio::time::timeout(
        Duration::from_secs(5),
        RemoteLocker::connect(bound.to_string(), RemoteConfig::new(TOKEN)),
    )
    .await
    .expect("connect within its timeout")
    .expect("connect");
    let args = LockArgs {
        uid: format!("uid-{ADMIN}").into(),
        resources: vec!["job".to_owned()].into(),
        owner: "owner".into(),
        source: "tests/net".into(),
        quorum: 1,
    };
    let refreshed = tokio::time::timeout(
        Duration::from_secs(5),
        client.refresh_mode(&args, LockMode::Write),
    )
    .await
    .expect("the refresh ends within its timeout");
    assert!(refreshed.is_err(), "the quarantine answers: {refreshed:?}");

    let lines = capture.lines();
    assert!(
        lines.iter().any(|line| line.contains("re-created entries")),
        "the re-creation was not logged: {lines:#?}"
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
