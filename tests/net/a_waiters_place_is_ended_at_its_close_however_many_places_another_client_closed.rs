//! Reproduces a past break: a waiter's closed connection keeps its place in line until the server's one clean-up thread has ended every place another client's connections closed before it, so the waiter behind it is held up by that other client.
#![cfg(feature = "net")]

use std::time::{Duration, Instant};

use crate::node::{args, heavy_connections, remote, reservation, start, TOKEN};
use quorum_lock::net::ServerConfig;
use quorum_lock::{LockMode, NetLocker, Ticket, WaitArgs, WaitReply};

/// docs/guarantees.md, "A waiter's place is a lease": "a lock server drops
/// the places of a connection as soon as it closes (the work runs on a
/// thread of its own, so that ending many places holds no other client
/// up)". One client keeps, over three connections, as many places of 1,000
/// names as each connection's limits let it (within the defaults), and
/// closes them. A waiter keeps a place on `x` over its own connection and
/// closes it once their clean-up has begun. The holder of `x` lets go, and a waiter in the
/// server's own process that asked after the closed one is looked at every
/// 10 ms: it must be granted while the other client's places are still
/// being ended, the closed waiter's place being gone.
/// The break: the closed waiter's clean-up runs after all of the other
/// client's, on the one thread, and its place stands until then. Bounded:
/// 20 s at most.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_waiters_place_is_gone_at_once_however_many_places_another_client_closed() {
    let node = start(ServerConfig::new(TOKEN)).await;
    let holder = remote(&node).await;
    let held = vec!["held".to_string()];
    let x = vec!["x".to_string()];
    assert!(holder.lock(&args("holder", &held)).await.unwrap());
    assert!(holder.lock(&args("holder-x", &x)).await.unwrap());
    let heavy = heavy_connections(&node, 3).await;
    let places = node.locker.waiting();
    assert!(places > 100_000, "places on names: {places}");
    let waiter = remote(&node).await;
    let reply = waiter
        .lock_wait(&args("waiter", &x), LockMode::Write, &reservation())
        .await
        .unwrap();
    assert_eq!(reply, WaitReply::Refused, "the waiter keeps a place on x");
    let later = WaitArgs {
        ticket: Ticket::now(),
        place_ttl: Duration::from_secs(60),
        wake: None,
    };
    drop(heavy);
    // The other client's clean-ups have begun: its places are going.
    let begun = Instant::now();
    while node.locker.waiting() > places && begun.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    drop(waiter);
    let closed = Instant::now();
    assert!(holder.unlock(&args("holder-x", &x)).await.unwrap());
    let granted = loop {
        assert!(closed.elapsed() < Duration::from_secs(20), "never granted");
        let reply = node
            .locker
            .lock_wait(&args("later", &x), LockMode::Write, &later)
            .await
            .unwrap();
        if reply == WaitReply::Granted {
            break (closed.elapsed(), node.locker.waiting());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    // Granted while the other client's places were still being ended: the
    // closed waiter's place did not wait for them. (A bound in
    // milliseconds would measure the machine too.)
    let (granted, left) = granted;
    assert!(
        left > 0,
        "the later waiter was granted x {granted:?} after the first waiter's connection closed, \
         only once every place of another client's connections, closed just before with \
         {places} places on names, had been ended"
    );
    drop(holder);
}
