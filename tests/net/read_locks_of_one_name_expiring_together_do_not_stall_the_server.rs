//! Reproduces a past break: a client with the ordinary token takes tens of thousands of read locks on one name and stops refreshing them; when they expire, the server drops them one by one, each time going through every reader of the name left, under that name's shard, so the next calls stall for seconds.
//!
//! docs/lock-servers.md, "A compromised client": a client can fill limits,
//! "each of which bounds it", and must not make the server stall; holding
//! locks "takes refreshing within the validity". `Shard::expire`
//! (src/local/table.rs) says it "costs O(1) per expired entry", but drops
//! each expired reader with `v.retain(|e| e.slot != slot)` over the
//! name's whole list of readers: quadratic in the readers that expire
//! together, all in one loop under the shard's lock. A name may have as
//! many read holders as the client's limits allow (about 28,000 per
//! connection within its 64 MiB; 64 connections per address; a 1 GiB
//! table), and a client need do nothing but stop refreshing.
//!
//! Four client connections take 10,000 read locks each on `x` (40,000
//! holders), on a server whose clock (a `DriftClock`) is then run 1,000
//! times faster, so that they all expire at once. Another client then asks
//! to write `x`: its call times out (5 s) and the server answers after
//! about 15 s on the debug build. Stack samples of the server in that time
//! show it in `Shard::expire`'s `retain` (whichever call first expires the
//! shard pays for it: a `Health` call's sweep, when that comes first).
#![cfg(all(feature = "net", feature = "testing"))]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use quorum_lock::net::{RemoteLocker, ServerConfig};
use quorum_lock::testing::DriftClock;
use quorum_lock::{LocalLocker, LockArgs, LockerConfig, NetLocker};

use crate::capped;
use crate::node::TOKEN;

/// Client connections that take read locks.
const CONNECTIONS: usize = 4;

/// Read holders per client connection.
const PER_CONNECTION: usize = 10_000;

fn args(uid: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec!["x".to_owned()].into(),
        owner: "readers".into(),
        source: "tests/net/read_locks_of_one_name_expiring_together_do_not_stall_the_server.rs"
            .into(),
        quorum: 1,
    }
}

/// Takes `PER_CONNECTION` read locks on `x` over `client`, 100 at a time.
async fn read_many(client: Arc<RemoteLocker>, which: usize) -> usize {
    let mut granted = 0;
    for batch in 0..PER_CONNECTION / 100 {
        let calls = (0..100).map(|i| {
            let client = client.clone();
            async move {
                let uid = format!("{which:02}-{batch:04}-{i:04}-0000-0000-000000000000");
                client.rlock(&args(&uid)).await
            }
        });
        for answer in join_all(calls).await {
            if answer == Ok(true) {
                granted += 1;
            }
        }
    }
    granted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn read_locks_of_one_name_expiring_together_leave_the_server_answering() {
    let clock = DriftClock::new();
    let locker = LocalLocker::with_clock(
        "node",
        LockerConfig {
            validity: Duration::from_secs(60),
            quarantine: Duration::ZERO,
        },
        clock.clone(),
    );
    let (addr, _stop) = capped::serve(Arc::new(locker), ServerConfig::new(TOKEN)).await;
    let mut readers = Vec::new();
    for _ in 0..CONNECTIONS {
        readers.push(Arc::new(capped::connect(&addr, TOKEN).await));
    }
    let granted: usize = join_all(
        readers
            .iter()
            .enumerate()
            .map(|(which, client)| read_many(client.clone(), which)),
    )
    .await
    .into_iter()
    .sum();
    assert_eq!(
        granted,
        CONNECTIONS * PER_CONNECTION,
        "control: every read lock is granted, within the limits"
    );
    let writer = capped::connect(&addr, TOKEN).await;

    // The readers stop refreshing; 100 ms later their validity is long past.
    clock.set_rate(1000.0).expect("a rate");
    tokio::time::sleep(Duration::from_millis(100)).await;

    let started = Instant::now();
    let written = tokio::time::timeout(Duration::from_secs(60), writer.lock(&args("writer")))
        .await
        .expect("the write lock's call ends");
    let write_took = started.elapsed();
    assert!(
        written == Ok(true) && write_took < Duration::from_secs(2),
        "after {granted} read locks of one name (taken with the ordinary token, within its \
         limits) expired together, a write lock of that name answered {written:?} after \
         {write_took:?}: the server stalled dropping them"
    );
}
