//! Reproduces a past break: a client with the ordinary token lines up tens of thousands of read waiters behind a write lock of one name; when the writer lets go, the server grants them one by one, each time going through every reader granted before it, under that name's shard, so the release stalls for seconds.
//!
//! docs/lock-servers.md, "A compromised client": a client "can take locks
//! and places in line on any name ... as any lock holder can", can fill
//! limits, "each of which bounds it" (1024 places per connection, 64
//! connections per address), and must not make the server stall.
//! `Shard::promote` (src/local/table.rs) grants every reader at the head
//! of the line at once, under the shard's lock, through `Shard::grant`,
//! which first looks through the name's holders for the uid
//! (`holders.entries_mut().iter_mut().find(...)`): quadratic in the
//! readers granted together.
//!
//! A writer holds `x`; 25 client connections line up 1,000 read waiters
//! each on it (25,000 places, within 1,024 per connection); the writer
//! then unlocks `x`. On the debug build the unlock answers after about
//! 3.5 s, and a stack sample in that time shows the server in
//! `Shard::promote` → `Shard::grant`'s `find`, another call waiting for
//! the shard. The time grows with the square of the waiters: a client may
//! line up 1,024 per connection on 64 connections per address.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use quorum_lock::net::{RemoteLocker, ServerConfig};
use quorum_lock::{LockMode, NetLocker, PushEvent, PushSink, Ticket, WaitArgs, Wake};

use crate::node::{start, TOKEN};
use crate::{args, capped};

/// Client connections that line up read waiters.
const CONNECTIONS: usize = 25;

/// Read waiters per client connection (at most 1,024).
const PER_CONNECTION: usize = 1_000;

struct Ignore;

impl PushSink for Ignore {
    fn push(&self, _slot: usize, _uid: &str, _event: PushEvent) {}
}

/// Lines up `PER_CONNECTION` read waiters on `x` over `client`; how many
/// were placed in line.
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
                client.lock_wait(&args(&uid), LockMode::Read, &wait).await
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
async fn readers_waiting_on_one_name_are_granted_together_without_stalling_the_release() {
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
        CONNECTIONS * PER_CONNECTION,
        "control: every read waiter has its place ({placed} answered)"
    );

    let started = Instant::now();
    let released = tokio::time::timeout(Duration::from_secs(60), writer.unlock(&held))
        .await
        .expect("the unlock's call ends");
    let took = started.elapsed();
    eprintln!("unlock took {took:?}");
    assert!(
        released == Ok(true) && took < Duration::from_secs(2),
        "the writer's unlock of a name {placed} read waiters (lined up with the ordinary token, \
         within its limits) wait for answered {released:?} after {took:?}: the server stalled \
         granting them"
    );
}
