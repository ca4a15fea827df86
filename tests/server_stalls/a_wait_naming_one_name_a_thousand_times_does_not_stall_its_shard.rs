//! Reproduces a past break: a client with the ordinary token waits for a write lock with one request naming the same name 1,000 times; the server, which takes duplicate names as they come, places the request once per copy in that name's line, each time wounding every younger reader of the name, and other calls on the name's shard stall for seconds while it builds a notice per copy per reader.
//!
//! docs/lock-servers.md, "A compromised client": a client can take locks
//! and places in line on any name and fill limits, "each of which bounds
//! it" (at most 1000 names per request, 1024 places per connection, about
//! 28,000 read locks of one short name per connection), and must not make
//! the server stall ("Limits and memory": the memory a client can make the
//! server use is bounded). `LockArgs::resources` is documented "sorted and
//! without duplicates", but neither the server nor `LockArgs::validate`
//! refuses duplicates: `grant_or_queue` (src/local/waiting.rs) runs
//! `Shard::enqueue` once per copy, and each enqueue calls `wound_younger`
//! over all of the name's holders, so one request builds copies x readers
//! `Notice`s (about 48 bytes each: 1.5 GB here) under the shard's lock
//! (besides a pass over the name's line per copy in `superseded` and
//! `enqueue`, which with 25,000 waiters instead of readers holds the
//! shard about 1 s).
//!
//! 32,000 readers hold `x`, each granted through a wait with a ticket
//! (made on the table itself, as two connections' read waits would make
//! them). Another client then waits for a write lock naming `x` 1,000
//! times, with a ticket older than theirs. Meanwhile a third client locks
//! and unlocks another name of `x`'s shard every 10 ms; the slowest lock
//! and unlock is timed. On the debug build it answers after 2.7 to 3.4 s
//! (the hostile call after 3.8 to 4.7 s; the test's peak RSS is 1.5 GB); naming
//! `x` once, the same wait builds 32,000 notices and answers at once.
//! Now every locker refuses a request that names a resource twice
//! (`LockArgs::validate_resources`).
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::net::ServerConfig;
use quorum_lock::{LocalLocker, LockArgs, LockMode, NetLocker, Ticket, WaitArgs, WaitReply};

use crate::node::TOKEN;
use crate::{args, capped};

/// Readers of `x`, granted through waits.
const READERS: usize = 32_000;

/// Copies of `x` in the hostile request (at most 1,000 names).
const COPIES: usize = 1_000;

fn wait(ticket: Ticket) -> WaitArgs {
    WaitArgs {
        ticket,
        place_ttl: Duration::from_secs(60),
        wake: Some(crate::ignored()),
    }
}

/// A name other than `x` in `x`'s shard (FNV-1a over 64 shards, as
/// src/local/shards.rs's `shard_of`).
fn shard_mate() -> String {
    fn shard(name: &str) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for &byte in name.as_bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        hash % 64
    }
    (0..10_000)
        .map(|i| format!("mate-{i}"))
        .find(|n| shard(n) == shard("x"))
        .expect("a name in x's shard")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    debug_assertions,
    ignore = "times a loaded server: run optimized, `cargo test --release --all-features --test server_stalls` (CI does)"
)]
async fn a_wait_naming_one_name_a_thousand_times_does_not_stall_its_shard() {
    let _one_at_a_time = crate::HEAVY.lock().await;
    let locker = Arc::new(LocalLocker::new());
    // Older than every reader's: its place wounds them all.
    let hostile_ticket = Ticket::now();
    for i in 0..READERS {
        let uid = format!("{i:08}-0000-0000-0000-000000000000");
        let granted = locker
            .lock_wait(&args(&uid), LockMode::Read, &wait(Ticket::now()))
            .await;
        assert_eq!(granted, Ok(WaitReply::Granted), "control");
    }
    let (addr, _stop) = capped::serve(locker.clone(), ServerConfig::new(TOKEN)).await;
    let hostile = Arc::new(capped::connect(&addr, TOKEN).await);
    let other = capped::connect(&addr, TOKEN).await;
    let mate = shard_mate();
    let probe = |i: usize| LockArgs {
        resources: vec![mate.clone()].into(),
        ..args(&format!("probe-{i:04}-0000-0000-000000000000"))
    };
    assert_eq!(other.lock(&probe(0)).await, Ok(true), "control");
    assert_eq!(other.unlock(&probe(0)).await, Ok(true), "control");

    let copies = LockArgs {
        resources: vec!["x".to_owned(); COPIES].into(),
        ..args("hostile-0000-0000-0000-000000000000")
    };
    let attack = tokio::spawn({
        let hostile = hostile.clone();
        async move {
            let started = Instant::now();
            let reply = tokio::time::timeout(
                Duration::from_secs(120),
                hostile.lock_wait(&copies, LockMode::Write, &wait(hostile_ticket)),
            )
            .await;
            (reply, started.elapsed())
        }
    });
    let mut slowest = Duration::ZERO;
    for i in 1..=2_000 {
        if attack.is_finished() {
            break;
        }
        let started = Instant::now();
        let probed = tokio::time::timeout(Duration::from_secs(120), async {
            let locked = other.lock(&probe(i)).await;
            (locked, other.unlock(&probe(i)).await)
        })
        .await
        .expect("the probe's calls end");
        slowest = slowest.max(started.elapsed());
        assert_eq!(
            probed,
            (Ok(true), Ok(true)),
            "control: the probe's name is free"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (reply, took) = attack.await.expect("the hostile call's task");
    eprintln!("hostile wait {reply:?} took {took:?}; slowest probe {slowest:?}");
    assert!(
        slowest < crate::STALL_BAR,
        "while a client waited for a write lock naming x {COPIES} times ({reply:?} after \
         {took:?}; x has {READERS} readers, taken with the ordinary token within its \
         limits), a lock and unlock of another name of x's shard answered after {slowest:?}: the server \
         stalled on the copies"
    );
}
