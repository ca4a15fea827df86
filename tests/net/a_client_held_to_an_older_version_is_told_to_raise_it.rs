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

use crate::stand_in;
use crate::versions_refused::{reject_every_version, why_the_connect_failed};

#[tokio::test]
async fn a_client_held_to_an_older_version_is_told_to_raise_it() {
    let (listener, addr) = stand_in::bind().await;
    let server = tokio::spawn(reject_every_version(listener, |_| "5 and 6"));

    let mut config = stand_in::config();
    config.protocol_version = 4;
    let why = why_the_connect_failed(addr, config, server).await;
    assert!(
        !why.contains("upgrade the client or the server") && why.contains("protocol_version"),
        "the client is held to version 4 and the server speaks 5 and 6, which this build \
         speaks too: the reason should name RemoteConfig::protocol_version, not send the \
         operator to upgrade a build; got: {why}"
    );
}
