//! Reproduces a past break: a client offering its newest version (RemoteConfig::protocol_version at its default), stepped down by one rejection and then turned away for the older version it fell back to, was told it is held to that older version by RemoteConfig::protocol_version and to raise the setting to the version it already has.
//!
//! `RemoteLocker::connect`: a server that speaks no protocol version this
//! client offers leaves the locker offline, `connect_error` saying "to
//! raise `RemoteConfig::protocol_version` when a newer version both speak
//! exists, else to upgrade the client or the server". Here the endpoint
//! (one name in front of servers being upgraded, say) first answers the
//! client's version 6 as a server speaking 2 to 5, then the version 5 the
//! client falls back to as one speaking 6 and 7. The setting is 6
//! already: telling the operator to raise it to 6 sends them after a
//! setting that holds nothing back.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use tokio::io::AsyncWriteExt;

use crate::stand_in;
use crate::wire;

#[tokio::test]
async fn a_client_offering_its_newest_version_is_not_told_to_raise_it() {
    let (listener, addr) = stand_in::bind().await;
    let server = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let Ok(hello) = wire::read_frame(&mut stream, 4096).await else {
                continue;
            };
            let (version, _) = wire::read_varint(&hello).expect("a version");
            let spoken = if version >= 6 {
                "2, 3, 4 and 5"
            } else {
                "6 and 7"
            };
            let reason =
                format!("protocol version {version} is not supported; this server speaks {spoken}");
            let _ = stream
                .write_all(&wire::frame(&wire::rejected(&reason)))
                .await;
        }
    });

    let config = stand_in::config();
    let offered = config.protocol_version;
    assert_eq!(offered, 6, "the default is this build's newest version");
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
        !why.contains("raise it to 6") && !why.contains("held to version 5"),
        "RemoteConfig::protocol_version is {offered}, this build's newest: the locker is held \
         to no older version by it, and raising it to 6 changes nothing; got: {why}"
    );
}
