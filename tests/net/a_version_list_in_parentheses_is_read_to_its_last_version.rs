//! Reproduces a past break: a server whose version rejection lists its versions in parentheses, "(this server speaks 2, 3, 4 and 5)", was asked again with version 4, not 5, because the list's last word "5)" was read as no version.
//!
//! PROTOCOL.md, "Versioning": "When a server rejects the `Hello` with a
//! reason that begins with `protocol version` and lists, after `this
//! server speaks`, an older version the client also speaks, the client
//! connects again at once and offers the newest such version". Here the
//! reason begins so and lists 2, 3, 4 and 5, the list closed by a
//! parenthesis; the client speaks 5, so 5 is the version to offer next.
//! Offered 4, the client loses what version 5 brought (leader election)
//! on a server that has it. Before the version list ended at the first
//! word that is no number, every run of digits after "this server speaks"
//! counted.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use crate::stand_in;
use crate::wire;

#[tokio::test]
async fn a_version_list_in_parentheses_is_read_to_its_last_version() {
    let (listener, addr) = stand_in::bind().await;
    let (offered_tx, mut offered_rx) = mpsc::unbounded_channel::<u64>();
    let server = tokio::spawn(async move {
        // Bounded: a handful of connections at most.
        for _ in 0..8 {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let Ok(hello) = wire::read_frame(&mut stream, 4096).await else {
                continue;
            };
            let (version, _) = wire::read_varint(&hello).expect("a version");
            let _ = offered_tx.send(version);
            let welcome = if version >= 6 {
                wire::rejected(&format!(
                    "protocol version {version} is not supported (this server speaks 2, 3, 4 \
                     and 5)"
                ))
            } else {
                wire::accepted(version as u16, Duration::from_secs(10))
            };
            let _ = stream.write_all(&wire::frame(&welcome)).await;
            // Held open, so that the client keeps the connection.
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(10)).await;
                drop(stream);
            });
        }
    });

    let locker = tokio::time::timeout(
        Duration::from_secs(5),
        RemoteLocker::connect(addr, stand_in::config()),
    )
    .await
    .expect("connect ended in time")
    .expect("connect");
    let version = locker.protocol_version();
    let why = locker.connect_error().map(|e| e.to_string());
    server.abort();
    let mut offered = Vec::new();
    while let Ok(v) = offered_rx.try_recv() {
        offered.push(v);
    }

    assert_eq!(
        version,
        Some(5),
        "the server named 2, 3, 4 and 5 after \"this server speaks\": the client should have \
         offered 5, the newest version both speak (offered in turn: {offered:?}; connect \
         error: {why:?})"
    );
}
