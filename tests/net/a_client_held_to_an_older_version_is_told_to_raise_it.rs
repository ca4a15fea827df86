//! Reproduces a past break: a client held to an older protocol version (`RemoteConfig::protocol_version`) by a server that speaks only newer ones, this client's newest among them, was told to upgrade the client or the server, as if no version both speak existed.
//!
//! `RemoteLocker::connect`: a server "that speaks no protocol version this
//! client speaks" leaves the locker offline with `connect_error` saying to
//! upgrade the client or the server. PROTOCOL.md, "Versioning": "A
//! `RemoteLocker` can be held to an older version with
//! `RemoteConfig::protocol_version`." Here the client is held to 4 and the
//! server speaks 5 and 6, both of which this build speaks: nothing needs
//! upgrading; the version the client is held to does. What the locker
//! says must not send its operator to upgrade builds that already speak
//! a common version, and should name the setting that holds it back.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use tokio::io::AsyncWriteExt;

use crate::stand_in;
use crate::wire;

#[tokio::test]
async fn a_client_held_to_an_older_version_is_told_to_raise_it() {
    let (listener, addr) = stand_in::bind().await;
    let server = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let Ok(hello) = wire::read_frame(&mut stream, 4096).await else {
                continue;
            };
            let (version, _) = wire::read_varint(&hello).expect("a version");
            let reason =
                format!("protocol version {version} is not supported; this server speaks 5 and 6");
            let _ = stream
                .write_all(&wire::frame(&wire::rejected(&reason)))
                .await;
        }
    });

    let mut config = stand_in::config();
    config.protocol_version = 4;
    let made = tokio::time::timeout(Duration::from_secs(5), RemoteLocker::connect(addr, config))
        .await
        .expect("connect ended in time");
    server.abort();

    let why = match made {
        Ok(locker) => locker
            .connect_error()
            .expect("offline, with the reason")
            .to_string(),
        Err(err) => err.to_string(),
    };
    assert!(
        !why.contains("upgrade the client or the server") && why.contains("protocol_version"),
        "the client is held to version 4 and the server speaks 5 and 6, which this build \
         speaks too: the reason should name RemoteConfig::protocol_version, not send the \
         operator to upgrade a build; got: {why}"
    );
}
