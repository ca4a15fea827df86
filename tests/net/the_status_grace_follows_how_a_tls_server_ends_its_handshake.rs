//! `status` and `locks` give a TLS lock server that closed or reset the
//! connection in its handshake time to take the connection opened again,
//! and none to a server that refused the handshake with a TLS alert.
//!
//! docs/cli.md: "`status` and `locks` give a lock server that closed or
//! reset the connection during the handshake, or turned it away as busy
//! (as a server at its connection limit does under a flood), up to 2 s to
//! take the connection its client opens again in the background, before
//! they call it unreachable"; and cli/src/fleet.rs (`reconnected`): "a
//! server that did not answer (refused, no route, a timeout) is not waited
//! for". The grace is read from the reason's first words ([`GRACED`]).
//!
//! A stand-in on 127.0.0.1 takes each connection, reads the client's first
//! TLS record header, then ends it as the test asks. Real time (sockets),
//! every wait bounded.
#![cfg(feature = "tls")]

use std::time::Duration;

use quorum_lock::net::{ClientTls, RemoteConfig, RemoteLocker};
use quorum_lock::{Error, NetLocker};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::tls_files::CA;

/// The words cli/src/fleet.rs reads as a server that ended the connection
/// in its handshake.
const GRACED: [&str; 3] = [
    "the server closed the connection during the handshake",
    "handshake failed",
    "the server turned the connection away",
];

/// How the stand-in ends a connection once the client's first TLS bytes
/// came.
#[derive(Clone, Copy)]
enum Ending {
    /// It closes its side in good order (FIN), as a full server does.
    Close,
    /// It resets the connection (SO_LINGER 0).
    Reset,
    /// It answers with a plaintext fatal alert of this description, then
    /// closes.
    Alert(u8),
}

/// A listener that ends each connection (20 at most) as `ending` says.
async fn stand_in(ending: Ending) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    tokio::spawn(async move {
        for _ in 0..20 {
            let Ok((mut peer, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(10), async move {
                    let mut first = [0u8; 5];
                    if peer.read_exact(&mut first).await.is_err() {
                        return;
                    }
                    match ending {
                        Ending::Reset => {
                            let _ = peer.set_zero_linger();
                            drop(peer);
                            return;
                        }
                        Ending::Alert(description) => {
                            // An alert record: content type 21, TLS 1.2,
                            // two bytes: level fatal (2) and the
                            // description.
                            let alert = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, description];
                            if peer.write_all(&alert).await.is_err() {
                                return;
                            }
                        }
                        Ending::Close => {}
                    }
                    let _ = peer.shutdown().await;
                    // Drain whatever the client sends, so that the close
                    // stays a close (no unread bytes, no reset).
                    let mut sink = [0u8; 1024];
                    while matches!(peer.read(&mut sink).await, Ok(n) if n > 0) {}
                })
                .await;
            });
        }
    });
    addr
}

/// Why a TLS client of the stand-in at `addr` is offline.
async fn reason_offline(addr: &str) -> String {
    let mut config = RemoteConfig::new("client-secret");
    config.connect_timeout = Duration::from_secs(2);
    config.tls = Some(
        ClientTls::new(CA)
            .and_then(|tls| tls.server_name("localhost"))
            .expect("client tls"),
    );
    let locker = tokio::time::timeout(Duration::from_secs(10), RemoteLocker::connect(addr, config))
        .await
        .expect("connect ends within its timeout")
        .expect("an offline locker, not an error");
    assert!(!locker.is_online());
    match locker.connect_error().expect("an offline locker says why") {
        Error::LockerUnavailable { reason, .. } => reason,
        Error::Tls { reason, .. } => format!("TLS refused: {reason}"),
        other => panic!("unexpected error: {other}"),
    }
}

fn graced(reason: &str) -> bool {
    GRACED.iter().any(|words| reason.starts_with(words))
}

/// Reproduces a past break: a TLS server at its connection limit closes
/// a new connection before its TLS handshake, and the client worded it
/// "the server closed the connection during the TLS handshake ...", which
/// the command line did not read as such: over TLS a full server showed
/// as unreachable at once, where over plain TCP it got its 2 s.
#[tokio::test]
async fn a_tls_server_closing_in_its_tls_handshake_gets_the_status_grace() {
    let reason = reason_offline(&stand_in(Ending::Close).await).await;
    assert!(
        graced(&reason),
        "a lock server that closed the connection in its TLS handshake gets no grace from \
         `status`/`locks`: {reason}"
    );
}

/// Reproduces a past break: the same with a reset, worded "TLS handshake
/// failed: Connection reset by peer ...".
#[tokio::test]
async fn a_tls_server_resetting_in_its_tls_handshake_gets_the_status_grace() {
    let reason = reason_offline(&stand_in(Ending::Reset).await).await;
    assert!(
        graced(&reason),
        "a lock server that reset the connection in its TLS handshake gets no grace from \
         `status`/`locks`: {reason}"
    );
}

/// Reproduces a past break: a server answering the ClientHello with a
/// fatal `protocol_version` or `handshake_failure` alert (no TLS version
/// or cipher suite in common: a setting no retry mends) was worded
/// "handshake failed (TLS's): ...", as one that ended the connection, so
/// `status` and `locks` waited 2 s for a server that refuses every try.
#[tokio::test]
async fn a_tls_server_refusing_with_an_alert_gets_no_status_grace() {
    // protocol_version (70), handshake_failure (40).
    for description in [70u8, 40] {
        let reason = reason_offline(&stand_in(Ending::Alert(description)).await).await;
        assert!(
            !graced(&reason),
            "a TLS server that refused the handshake with fatal alert {description} is \
             worded as one that closed or reset it, and gets `status`/`locks`' 2 s grace: \
             {reason}"
        );
    }
}
