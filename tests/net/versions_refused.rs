//! The stand-in of the tests in which a server refuses the protocol
//! version a client offers: it rejects every hello, naming the versions it
//! speaks, and the reason the client then gives.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::wire;

/// Rejects every hello on `listener` with "protocol version {v} is not
/// supported; this server speaks {spoken(v)}", `v` being the version the
/// hello offers. Serves until aborted.
pub async fn reject_every_version(listener: TcpListener, spoken: fn(u64) -> &'static str) {
    while let Ok((mut stream, _)) = listener.accept().await {
        let Ok(hello) = wire::read_frame(&mut stream, 4096).await else {
            continue;
        };
        let (version, _) = wire::read_varint(&hello).expect("a version");
        let spoken = spoken(version);
        let reason =
            format!("protocol version {version} is not supported; this server speaks {spoken}");
        let _ = stream
            .write_all(&wire::frame(&wire::rejected(&reason)))
            .await;
    }
}

/// A locker of `addr` with `config`, which must end its connect within
/// 5 s (the server is then aborted): the reason it gives for being
/// offline, or the error `connect` returned.
pub async fn why_the_connect_failed(
    addr: String,
    config: RemoteConfig,
    server: tokio::task::JoinHandle<()>,
) -> String {
    let made = tokio::time::timeout(Duration::from_secs(5), RemoteLocker::connect(addr, config))
        .await
        .expect("connect ended in time");
    server.abort();
    match made {
        Ok(locker) => locker
            .connect_error()
            .expect("offline, with the reason")
            .to_string(),
        Err(err) => err.to_string(),
    }
}
