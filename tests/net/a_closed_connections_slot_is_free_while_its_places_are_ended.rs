//! Reproduces a past break: a closed connection keeps its slot while the clean-up thread ends its places, so a client connecting after every other connection closed is refused as busy for as long as that work takes.
#![cfg(feature = "net")]

use std::time::{Duration, Instant};

use crate::node::{args, heavy_connections, remote, start, TOKEN};
use quorum_lock::net::{RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::NetLocker;

/// A server of one client connection besides a holder's. A client fills
/// it with as many places of 1,000 names as its limits let it keep (within
/// the defaults) and closes it. Another client then connects: every
/// connection but the holder's has closed, so a slot is free ("closed,
/// which frees its slot"; "ending many places holds no other client up").
/// The break: the closed connection's task waits for the server's
/// clean-up thread to end its places before it gives its slot back, so the
/// newcomer is refused `server busy` until the thread is done. Bounded:
/// the newcomer tries for 20 s at most.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_connecting_after_every_other_connection_closed_gets_a_slot_at_once() {
    let mut config = ServerConfig::new(TOKEN);
    // One for the holder, which stays connected, and one for the heavy
    // connection: the slot is free before the clean-up ends only if it is
    // given back before the clean-up rather than after it.
    config.max_connections = 2;
    let node = start(config).await;
    let holder = remote(&node).await;
    let held = vec!["held".to_string()];
    assert!(holder.lock(&args("holder", &held)).await.unwrap());
    let heavy = heavy_connections(&node, 1).await;
    let places = node.locker.waiting();
    assert!(places > 50_000, "places on names: {places}");
    drop(heavy);
    let closed = Instant::now();
    // When the clean-up thread has ended every place, watched every 5 ms.
    let locker = node.locker.clone();
    let cleaned = tokio::spawn(async move {
        while locker.waiting() > 0 && closed.elapsed() < Duration::from_secs(20) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        closed.elapsed()
    });
    // The newcomer's first lock that gets through, tried every 10 ms.
    let mut refused = 0;
    let served = loop {
        assert!(closed.elapsed() < Duration::from_secs(20), "never served");
        let mut config = RemoteConfig::new(TOKEN);
        config.connect_timeout = Duration::from_secs(1);
        if let Ok(newcomer) = RemoteLocker::connect(node.addr.clone(), config).await
            && let Ok(true) = tokio::time::timeout(
                Duration::from_secs(1),
                newcomer.lock(&args("newcomer", &["free".to_string()])),
            )
            .await
            .unwrap_or(Ok(false))
        {
            break closed.elapsed();
        }
        refused += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let cleaned = cleaned.await.unwrap();
    // Served while the clean-up still ran: the slots were free before it
    // ended. (A bound in milliseconds would measure the machine too.)
    assert!(
        served < cleaned,
        "the newcomer was served {served:?} after the other connections closed ({refused} \
         attempts refused); their {places} places on names were all ended after {cleaned:?}"
    );
    drop(holder);
}
