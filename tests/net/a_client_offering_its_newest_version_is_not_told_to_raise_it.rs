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

use crate::stand_in;
use crate::versions_refused::{reject_every_version, why_the_connect_failed};

#[tokio::test]
async fn a_client_offering_its_newest_version_is_not_told_to_raise_it() {
    let (listener, addr) = stand_in::bind().await;
    // Version 6 is answered as by a server speaking 2 to 5, the 5 the
    // client falls back to as by one speaking 6 and 7.
    let server = tokio::spawn(reject_every_version(listener, |version| {
        if version >= 6 {
            "2, 3, 4 and 5"
        } else {
            "6 and 7"
        }
    }));

    let config = stand_in::config();
    let offered = config.protocol_version;
    assert_eq!(offered, 6, "the default is this build's newest version");
    let why = why_the_connect_failed(addr, config, server).await;
    assert!(
        !why.contains("raise it to 6") && !why.contains("held to version 5"),
        "RemoteConfig::protocol_version is {offered}, this build's newest: the locker is held \
         to no older version by it, and raising it to 6 changes nothing; got: {why}"
    );
}
