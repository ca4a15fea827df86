//! Reproduces a past break: a server that rejected the client's protocol version, naming only versions newer than any the client speaks, was reported as rejecting the token (`Error::Unauthorized`, "check the token").
//!
//! `Error::Unauthorized` is "a lock server refused the connection's
//! credentials. Check the token", and `RemoteLocker::connect` returns it
//! for "a server that rejects the token". PROTOCOL.md, "Versioning": "A
//! server speaks a set of versions and rejects others in the handshake
//! with a reason". Here the token is the one the server expects; the
//! server turns the `Hello` away for its version only, saying which it
//! speaks (7 and 8, newer than this client's newest), in the very shape a
//! server of this build uses. The client's own check of a version it was
//! answered with ("upgrade the client or the server") shows what such a
//! gap should read as: a version mismatch, not a wrong token.
#![cfg(feature = "net")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::Error;
use tokio::io::AsyncWriteExt;

use crate::stand_in;
use crate::wire;

#[tokio::test]
async fn a_server_speaking_only_newer_versions_is_not_blamed_on_the_token() {
    let (listener, addr) = stand_in::bind().await;
    let hellos = Arc::new(AtomicUsize::new(0));
    let seen = hellos.clone();
    let server = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let Ok(hello) = wire::read_frame(&mut stream, 4096).await else {
                continue;
            };
            seen.fetch_add(1, Ordering::SeqCst);
            let (version, rest) = wire::read_varint(&hello).expect("a version");
            // The token is the right one: only the version is refused.
            let (len, token) = wire::read_varint(rest).expect("a token");
            assert_eq!(&token[..len as usize], stand_in::TOKEN.as_bytes());
            let reason =
                format!("protocol version {version} is not supported; this server speaks 7 and 8");
            let _ = stream
                .write_all(&wire::frame(&wire::rejected(&reason)))
                .await;
        }
    });

    let made = tokio::time::timeout(
        Duration::from_secs(5),
        RemoteLocker::connect(addr.clone(), stand_in::config()),
    )
    .await
    .expect("connect ended in time");
    server.abort();

    let err = match made {
        Ok(_) => return, // not reported as a rejected token, at least
        Err(err) => err,
    };
    let text = err.to_string();
    assert!(
        !matches!(err, Error::Unauthorized { .. }) && !text.contains("check the token"),
        "a server that refuses only the protocol version (the token was right; it speaks 7 \
         and 8) is reported as rejecting the token: {err:?} ({text}) after {} hello(s)",
        hellos.load(Ordering::SeqCst)
    );
}
