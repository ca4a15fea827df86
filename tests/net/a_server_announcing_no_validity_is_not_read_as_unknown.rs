//! Reproduces a past break: a lock server that announced a validity of zero in its handshake was reported by `RemoteLocker::validity()` as not having announced one, so a `Dsync` built on it trusted a lease of a minute on a server that frees entries at once.
//!
//! `NetLocker::validity` for a `RemoteLocker`: "The validity the server
//! announced in its last handshake; `None` before the first one
//! succeeded." PROTOCOL.md (`Welcome::Accepted`): "A client must not use
//! a lease longer than this: it would trust its lock after the server had
//! already freed it. `RemoteLocker::validity()` reports it, and a `Dsync`
//! refuses to build with a longer `Lease::validity`." `LockServer::new`
//! takes a `LocalLocker` whose `LockerConfig::validity` is zero, and the
//! server announces that zero; the client stores the validity as
//! nanoseconds with 0 standing for "no handshake yet", so after a
//! successful handshake it reports `None`, and `DsyncBuilder::build`
//! (which skips lockers whose validity is unknown) accepts the default
//! 60 s lease. With 1 ms announced instead, it refuses. (A `LockServer`
//! now refuses a locker of zero validity; a stand-in server announces
//! the zero instead.)
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{Dsync, NetLocker};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::lockers;
use crate::loopback;
use crate::{stand_in, wire};

const TOKEN: &str = "t0ken";

/// A server whose entries last `validity`, a locker connected to it, and
/// what `validity()` and `DsyncBuilder::build` say.
async fn announced(validity: Duration) -> (bool, Option<Duration>, bool) {
    let locker = lockers::without_quarantine("zero", validity);
    let server = LockServer::new(locker, ServerConfig::new(TOKEN)).expect("server builds");
    let (bound, stop, serving) = loopback::serve_with_its_task(server).await;
    let remote = tokio::time::timeout(
        Duration::from_secs(5),
        RemoteLocker::connect(bound.to_string(), RemoteConfig::new(TOKEN)),
    )
    .await
    .expect("connect ended in time")
    .expect("the token is the server's");
    let handshaken = remote.is_online() && remote.protocol_version().is_some();
    let reported = remote.validity();
    // The default lease: 60 s.
    let built = Dsync::builder(vec![Arc::new(remote) as Arc<dyn NetLocker>])
        .owner("holder")
        .build()
        .is_ok();
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(5), serving).await;
    (handshaken, reported, built)
}

/// A stand-in server that announces a validity of zero (a `LockServer`
/// refuses to be built so), a locker connected to it, and what
/// `validity()` and `DsyncBuilder::build` say.
async fn announced_by_a_stand_in(validity: Duration) -> (bool, Option<Duration>, bool) {
    let (listener, addr) = stand_in::bind().await;
    let server = tokio::spawn(async move {
        while let Some(mut stream) = stand_in::accept_hello(&listener).await {
            let welcome = wire::frame(&wire::accepted(wire::VERSION_6, validity));
            if stream.write_all(&welcome).await.is_err() {
                continue;
            }
            // Keeps the connection open, answering nothing.
            tokio::spawn(async move {
                let mut sink = [0u8; 1024];
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
            });
        }
    });
    let remote = tokio::time::timeout(
        Duration::from_secs(5),
        RemoteLocker::connect(addr, stand_in::config()),
    )
    .await
    .expect("connect ended in time")
    .expect("the stand-in takes any token");
    let handshaken = remote.is_online() && remote.protocol_version().is_some();
    let reported = remote.validity();
    let built = Dsync::builder(vec![Arc::new(remote) as Arc<dyn NetLocker>])
        .owner("holder")
        .build()
        .is_ok();
    server.abort();
    (handshaken, reported, built)
}

#[tokio::test]
async fn a_server_announcing_no_validity_is_not_read_as_unknown() {
    // The comparison: a server that keeps entries for 1 ms is reported,
    // and a 60 s lease on it is refused.
    let (handshaken, reported, built) = announced(Duration::from_millis(1)).await;
    assert!(handshaken, "the locker connected");
    assert_eq!(reported, Some(Duration::from_millis(1)));
    assert!(
        !built,
        "a 60 s lease on a server that keeps entries 1 ms is refused"
    );

    // A lock server is not built on a locker whose entries last no time.
    let zero = lockers::without_quarantine("zero", Duration::ZERO);
    assert!(
        LockServer::new(zero, ServerConfig::new(TOKEN)).is_err(),
        "a lock server on a locker of zero validity"
    );

    // A server that announces zero anyway (another build, a stand-in).
    let (handshaken, reported, built) = announced_by_a_stand_in(Duration::ZERO).await;
    assert!(handshaken, "the locker connected: the handshake succeeded");
    assert_eq!(
        reported,
        Some(Duration::ZERO),
        "the server announced a validity of zero in a handshake that succeeded; validity() \
         says none was announced (a Dsync on it built with a 60 s lease: {built})"
    );
    assert!(
        !built,
        "a 60 s lease on a server that keeps entries for no time at all must be refused"
    );
}
