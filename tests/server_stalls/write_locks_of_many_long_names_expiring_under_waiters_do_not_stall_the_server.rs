//! Reproduces a past break: a client with the ordinary token holds write locks on thousands of long names, each with a read waiter behind it, and stops refreshing; when they expire together, the server notes each freed name with a search of every name freed before it, so the next call stalls for seconds.
//!
//! docs/lock-servers.md, "A compromised client": a client can fill limits,
//! "each of which bounds it", and must not make the server stall; holding
//! locks "takes refreshing within the validity". `Shard::expire`
//! (src/local/table.rs) now drops a name's entries together, but each name
//! it frees under a waiter goes through `settle`, which keeps `freed` (a
//! `Vec` shared by every shard of `ShardSet::expire_all`) free of
//! duplicates with `freed.contains(...)`: quadratic in the names freed
//! together, each comparison a whole name (up to 1 KiB) when the names
//! share a long prefix.
//!
//! The server's table holds write locks on 20,000 names of 1,008 bytes
//! sharing their first 1,000 (made on the table itself, within one
//! connection's 100,000 locks and 64 MiB), each with one read waiter (20
//! connections' 1,000 places), the names chosen (by the table's fixed
//! FNV-1a shard hash) to lie in the shard of `x`; the clock then runs
//! fast until the locks have expired and the places have not. Another
//! client then locks `x`: on the debug build it answers after about 7 s
//! (the expiry pass holds the shard, searching `freed`); without the
//! waiters (nothing goes to `freed`) the same scene answers in 0.1 s.
#![cfg(all(feature = "net", feature = "testing"))]

use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::net::ServerConfig;
use quorum_lock::testing::DriftClock;
use quorum_lock::{
    LocalLocker, LockArgs, LockMode, LockerConfig, NetLocker, Ticket, WaitArgs, WaitReply,
};

use crate::node::TOKEN;
use crate::{args, capped};

/// Names written and waited for.
const NAMES: usize = 20_000;

/// The shards of the table and its hash of a name (FNV-1a, as
/// src/local/shards.rs's `shard_of`), continued from `hash`.
const SHARDS: u64 = 64;

fn fnv(mut hash: u64, bytes: &[u8]) -> u64 {
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// `NAMES` names of 1,008 bytes sharing their first 1,000, all in the
/// shard of `x` (the name a client then locks).
fn long_names() -> Vec<String> {
    let prefix = "p".repeat(1000);
    let after_prefix = fnv(FNV_START, prefix.as_bytes());
    let shard = fnv(FNV_START, b"x") % SHARDS;
    (0..)
        .map(|i: u64| format!("{i:08}"))
        .filter(|tail| fnv(after_prefix, tail.as_bytes()) % SHARDS == shard)
        .take(NAMES)
        .map(|tail| format!("{prefix}{tail}"))
        .collect()
}

/// A lock of `name` by `uid`.
fn long(uid: &str, name: &str) -> LockArgs {
    LockArgs {
        resources: vec![name.to_owned()].into(),
        ..args(uid)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    debug_assertions,
    ignore = "times a loaded server: run optimized, `cargo test --release --all-features --test server_stalls` (CI does)"
)]
async fn write_locks_of_many_long_names_expiring_under_waiters_leave_the_server_answering() {
    let _one_at_a_time = crate::HEAVY.lock().await;
    let clock = DriftClock::new();
    let locker = Arc::new(LocalLocker::with_clock(
        "node",
        LockerConfig {
            validity: Duration::from_secs(60),
            quarantine: Duration::ZERO,
        },
        clock.clone(),
    ));
    let names = long_names();
    for (i, name) in names.iter().enumerate() {
        let uid = format!("{i:08}-0000-0000-0000-00000000000w");
        assert_eq!(locker.lock(&long(&uid, name)).await, Ok(true), "control");
    }
    // 30 s on: the places below outlive the locks by as much.
    clock.set_rate(100.0).expect("a rate");
    tokio::time::sleep(Duration::from_millis(500)).await;
    clock.set_rate(1.0).expect("a rate");
    for (i, name) in names.iter().enumerate() {
        let uid = format!("{i:08}-0000-0000-0000-00000000000r");
        let wait = WaitArgs {
            ticket: Ticket::now(),
            place_ttl: Duration::from_secs(60),
            wake: Some(crate::ignored()),
        };
        assert_eq!(
            locker
                .lock_wait(&long(&uid, name), LockMode::Read, &wait)
                .await,
            Ok(WaitReply::Queued),
            "control"
        );
    }
    let (addr, _stop) = capped::serve(locker.clone(), ServerConfig::new(TOKEN)).await;
    let other = capped::connect(&addr, TOKEN).await;
    assert_eq!(
        locker.waiting(),
        NAMES,
        "control: every waiter has its place"
    );

    // The writers stop refreshing: 40 s on, their locks are past the
    // validity and the places are not.
    clock.set_rate(100.0).expect("a rate");
    tokio::time::sleep(Duration::from_millis(200)).await;
    clock.set_rate(1.0).expect("a rate");

    let started = Instant::now();
    let written = tokio::time::timeout(Duration::from_secs(120), other.lock(&args("x")))
        .await
        .expect("the write lock's call ends");
    let took = started.elapsed();
    eprintln!("lock took {took:?}");
    assert!(
        written == Ok(true) && took < crate::STALL_BAR,
        "after write locks of {NAMES} long names with a waiter each (taken with the ordinary \
         token, within its limits) expired together, a write lock of another name answered \
         {written:?} after {took:?}: the server stalled freeing them"
    );
}
