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
//! The server's table holds 24,000 read locks of `x` (made on the table
//! itself, as three client connections of 8,000 each would make them,
//! without a round trip each), and its clock (a `DriftClock`) is then run
//! 1,000 times faster, so that they all expire at once. Another client then asks
//! to write `x`: its call times out (5 s) and the server answers after
//! about 15 s on the debug build with 40,000 of them (the time grows with
//! their square). Stack samples of the server in that time
//! show it in `Shard::expire`'s `retain` (whichever call first expires the
//! shard pays for it: a `Health` call's sweep, when that comes first).
#![cfg(all(feature = "net", feature = "testing"))]

use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::net::ServerConfig;
use quorum_lock::testing::DriftClock;
use quorum_lock::{LocalLocker, LockerConfig, NetLocker};

use crate::node::TOKEN;
use crate::{args, capped, read_many};

/// Read holders of one name.
const HOLDERS: usize = 24_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    debug_assertions,
    ignore = "times a loaded server: run optimized, `cargo test --release --all-features --test server_stalls` (CI does)"
)]
async fn read_locks_of_one_name_expiring_together_leave_the_server_answering() {
    let _one_at_a_time = crate::HEAVY.lock().await;
    let clock = DriftClock::new();
    let locker = LocalLocker::with_clock(
        "node",
        LockerConfig {
            validity: Duration::from_secs(60),
            quarantine: Duration::ZERO,
        },
        clock.clone(),
    );
    let locker = Arc::new(locker);
    let granted = read_many(&locker, HOLDERS).await;
    let (addr, _stop) = capped::serve(locker, ServerConfig::new(TOKEN)).await;
    assert_eq!(
        granted, HOLDERS,
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
        written == Ok(true) && write_took < crate::STALL_BAR,
        "after {granted} read locks of one name (taken with the ordinary token, within its \
         limits) expired together, a write lock of that name answered {written:?} after \
         {write_took:?}: the server stalled dropping them"
    );
}
