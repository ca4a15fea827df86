//! Reproduces a past break: a client with the ordinary token lines up tens of thousands of read waiters behind a write lock; when the writer lets go, the server grants them one by one, each through a pass over the line or over every reader granted before it, so the release stalls for seconds.
//!
//! docs/lock-servers.md, "A compromised client": a client "can take locks
//! and places in line on any name ... as any lock holder can", can fill
//! limits, "each of which bounds it" (1024 places per connection, 64
//! connections per address), and must not make the server stall.
//!
//! Two breaks of this kind, each quadratic in the waiters granted
//! together, all inside the writer's unlock call:
//! - waiters of one name: `Shard::grant` looked through the name's holders
//!   for each uid it granted (25,000 waiters: the unlock answered after
//!   3.5 s on the debug build);
//! - waiters of two names each: each was granted alone, after passes over
//!   the whole line of each name (`has_place`, `in_line`, `place_wake`,
//!   `Shard::grant`'s `retain`) (15,000 waiters: the unlock's call timed
//!   out after 5 s, or answered after up to 18 s).
//!
//! Now a release grants the waiters of a line in one pass over it, and
//! those whose requests span several names in one batch that walks each
//! of their lines once (`LocalLocker::promote`).
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use quorum_lock::net::ServerConfig;
use quorum_lock::{LockArgs, LockMode, NetLocker, Ticket, WaitArgs};

use crate::node::{start, TOKEN};
use crate::{args, capped};

/// A lock of `names` by `uid`.
fn of(uid: &str, names: &[&str]) -> LockArgs {
    LockArgs {
        resources: names
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .into(),
        ..args(uid)
    }
}

/// Lines up `per_connection` read waiters on `names` with `client`, 100
/// at a time; how many were placed in line.
async fn wait_many(
    client: Arc<dyn NetLocker>,
    which: usize,
    per_connection: usize,
    names: &[&str],
) -> usize {
    let mut placed = 0;
    for batch in 0..per_connection / 100 {
        let calls = (0..100).map(|i| {
            let client = client.clone();
            async move {
                let uid = format!("{which:02}-{batch:02}-{i:04}-0000-0000-000000000000");
                let wait = WaitArgs {
                    ticket: Ticket::now(),
                    place_ttl: Duration::from_secs(60),
                    wake: Some(crate::ignored()),
                };
                client
                    .lock_wait(&of(&uid, names), LockMode::Read, &wait)
                    .await
            }
        });
        placed += join_all(calls)
            .await
            .into_iter()
            .filter(|r| r.is_ok())
            .count();
    }
    placed
}

/// A writer holds `x`; `per_connection` read waiters of each of
/// `connections` client connections wait on `names`; the writer's unlock of
/// `x` must answer within 2 s (a debug build's server grants them in a few
/// hundred milliseconds).
async fn a_release_lets_read_waiters_in_at_once(
    names: &[&str],
    connections: usize,
    per_connection: usize,
) {
    let _one_at_a_time = crate::HEAVY.lock().await;
    let node = start(ServerConfig::new(TOKEN)).await;
    let writer = capped::connect(&node.addr, TOKEN).await;
    let held = args("writer-0000-0000-0000-000000000000");
    assert_eq!(
        writer.lock(&held).await,
        Ok(true),
        "control: the writer holds x"
    );
    // Made on the table itself, as `connections` connections' waits would
    // make them (within their limits), without a round trip each: the
    // release's grants are what is timed.
    let table: Arc<dyn NetLocker> = node.locker.clone();
    let mut placed = 0;
    for which in 0..connections {
        placed += wait_many(table.clone(), which, per_connection, names).await;
    }
    assert_eq!(
        node.locker.waiting(),
        names.len() * connections * per_connection,
        "control: every read waiter has its place on {names:?} ({placed} answered)"
    );

    let started = Instant::now();
    let released = tokio::time::timeout(Duration::from_secs(120), writer.unlock(&held))
        .await
        .expect("the unlock's call ends");
    let took = started.elapsed();
    eprintln!("unlock took {took:?}");
    assert!(
        released == Ok(true) && took < crate::STALL_BAR,
        "the writer's unlock of a name {placed} read waiters of {names:?} (lined up with the \
         ordinary token, within its limits) wait for answered {released:?} after {took:?}: the \
         server stalled granting them"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    debug_assertions,
    ignore = "times a loaded server: run optimized, `cargo test --release --all-features --test server_stalls` (CI does)"
)]
async fn readers_waiting_on_one_name_are_granted_together_without_stalling_the_release() {
    a_release_lets_read_waiters_in_at_once(&["x"], 25, 1_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    debug_assertions,
    ignore = "times a loaded server: run optimized, `cargo test --release --all-features --test server_stalls` (CI does)"
)]
async fn readers_waiting_on_two_names_are_granted_together_without_stalling_the_release() {
    a_release_lets_read_waiters_in_at_once(&["x", "y"], 30, 500).await;
}
