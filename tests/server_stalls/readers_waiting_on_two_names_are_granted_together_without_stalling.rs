//! Reproduces a past break: a client with the ordinary token lines up tens of thousands of read waiters on two names behind a write lock of one; when the writer lets go, the server grants them one by one, each through scans of the whole line and of every reader granted before it, so the release stalls for seconds.
//!
//! docs/lock-servers.md, "A compromised client": a client "can take locks
//! and places in line on any name ... as any lock holder can", can fill
//! limits, "each of which bounds it" (1024 places per connection, 64
//! connections per address), and must not make the server stall.
//!
//! `Shard::promote` (src/local/table/promote.rs) now grants the places of
//! one name in linear time, but a place that covers other names too is
//! handed back in `Promotions::spanning`, and `LocalLocker::promote`
//! (src/local/mod.rs) grants each of those alone: `has_place`, `in_line`
//! (a pass over the whole line), `place_wake`, then `Shard::grant` on
//! every name (a `retain` over the line, and a search of every reader
//! granted before it). With N such waiters at the head of the line that is
//! quadratic in N, all inside the writer's unlock call.
//!
//! A writer holds `x`; 30 client connections line up 500 read waiters
//! each on `x` and `y` together (15,000 waits); the writer then unlocks
//! `x`. On the debug build the unlock's call times out (5 s) while the
//! server is still granting them, or answers after up to 18 s, where the same
//! number of waiters on `x` alone (see
//! `readers_waiting_on_one_name_are_granted_together_without_stalling`)
//! are granted at once.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use quorum_lock::net::{RemoteLocker, ServerConfig};
use quorum_lock::{LockArgs, LockMode, NetLocker, PushEvent, PushSink, Ticket, WaitArgs, Wake};

use crate::node::{start, TOKEN};
use crate::{args, capped};

/// Client connections that line up read waiters.
const CONNECTIONS: usize = 30;

/// Read waiters per client connection (each on two names).
const PER_CONNECTION: usize = 500;

struct Ignore;

impl PushSink for Ignore {
    fn push(&self, _slot: usize, _uid: &str, _event: PushEvent) {}
}

/// A lock of `x` and `y` by `uid`.
fn both(uid: &str) -> LockArgs {
    LockArgs {
        resources: vec!["x".to_owned(), "y".to_owned()].into(),
        ..args(uid)
    }
}

/// Lines up `PER_CONNECTION` read waiters on `x` and `y` over `client`;
/// how many were placed in line.
async fn wait_many(client: Arc<RemoteLocker>, which: usize) -> usize {
    let mut placed = 0;
    for batch in 0..PER_CONNECTION / 100 {
        let calls = (0..100).map(|i| {
            let client = client.clone();
            async move {
                let uid = format!("{which:02}-{batch:02}-{i:04}-0000-0000-000000000000");
                let wait = WaitArgs {
                    ticket: Ticket::now(),
                    place_ttl: Duration::from_secs(60),
                    wake: Some(Wake::new(Arc::new(Ignore), 0)),
                };
                client.lock_wait(&both(&uid), LockMode::Read, &wait).await
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_waiting_on_two_names_are_granted_together_without_stalling_the_release() {
    let _one_at_a_time = crate::HEAVY.lock().await;
    let node = start(ServerConfig::new(TOKEN)).await;
    let writer = capped::connect(&node.addr, TOKEN).await;
    let held = args("writer-0000-0000-0000-000000000000");
    assert_eq!(
        writer.lock(&held).await,
        Ok(true),
        "control: the writer holds x"
    );
    let mut placed = 0;
    for which in 0..CONNECTIONS {
        let client = Arc::new(capped::connect(&node.addr, TOKEN).await);
        placed += wait_many(client.clone(), which).await;
        // Kept open: a place lasts while its connection does.
        std::mem::forget(client);
    }
    assert_eq!(
        node.locker.waiting(),
        2 * CONNECTIONS * PER_CONNECTION,
        "control: every read waiter has its place on x and y ({placed} answered)"
    );

    let started = Instant::now();
    let released = tokio::time::timeout(Duration::from_secs(120), writer.unlock(&held))
        .await
        .expect("the unlock's call ends");
    let took = started.elapsed();
    eprintln!("unlock took {took:?}");
    assert!(
        released == Ok(true) && took < Duration::from_secs(2),
        "the writer's unlock of a name {placed} read waiters of two names (lined up with the \
         ordinary token, within its limits) wait for answered {released:?} after {took:?}: the \
         server stalled granting them"
    );
}
