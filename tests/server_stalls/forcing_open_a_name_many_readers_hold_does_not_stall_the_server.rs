//! Reproduces a past break: a client with the ordinary token takes tens of thousands of read locks on one name; the admin's force of that name by name then keeps the server busy for seconds under that name's shard (every call on the shard waits, a `Health` call among them), and the admin's call times out.
//!
//! docs/lock-servers.md, "A compromised client": filling limits "denies
//! other clients, but not the admin: ... an admin can then list the
//! culprit's locks ... and force them open"; a compromised client must
//! not make the server stall. A force by name (no uid, as `quorum-lock
//! force-unlock NAME` sends it) first asks the table who holds the names
//! (src/net/requests.rs, `Session::release`, through
//! `LocalLocker::holders_of` in src/local/server_queries.rs), which builds
//! the list of holders without duplicates with `Vec::contains` for each
//! one, under the shards' locks: quadratic in the holders, and a name may
//! have as many shared read holders as the client's limits allow (a
//! connection holds up to 100,000 locks or 64 MiB of table, about 28,000
//! read locks of one short name; a client may open 64 connections per
//! address, and the table holds 1 GiB).
//!
//! The server's table holds 30,000 read locks of `x` (made on the table
//! itself, as three client connections of 10,000 each would make them,
//! about 90 MiB of the 1 GiB table, each connection within its 64 MiB,
//! without a round trip each). The admin then forces `x` open by name. On the debug build the
//! force took about 8 s with 40,000 (about 4.5 s with the 30,000 here) (its call times out after 5 s, when the test's
//! runtime, which the server shares, gets to its timer); 40,000 holders is
//! far from the most a client may make, and the time grows with their
//! square. (With the holders gathered through a `HashSet` instead, the
//! force answers at once: the quadratic `contains` is the cause.)
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::net::ServerConfig;
use quorum_lock::{LocalLocker, LockArgs, NetLocker};

use crate::capped::{self, ADMIN};
use crate::node::TOKEN;
use crate::{args, read_many};

/// Read holders of one name.
const HOLDERS: usize = 30_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    debug_assertions,
    ignore = "times a loaded server: run optimized, `cargo test --release --all-features --test server_stalls` (CI does)"
)]
async fn forcing_open_a_name_many_readers_hold_ends_at_once_and_stalls_nobody() {
    let _one_at_a_time = crate::HEAVY.lock().await;
    let locker = Arc::new(LocalLocker::new());
    let granted = read_many(&locker, HOLDERS).await;
    assert_eq!(granted, HOLDERS, "control: every read lock is granted");
    let (addr, _stop) = capped::serve(locker, ServerConfig::new(TOKEN).admin_token(ADMIN)).await;

    let admin = capped::connect(&addr, ADMIN).await;
    let by_name = LockArgs {
        uid: "".into(),
        ..args("")
    };
    let started = Instant::now();
    let forced = tokio::time::timeout(Duration::from_secs(60), admin.force_unlock(&by_name))
        .await
        .expect("the force's call ends");
    let took = started.elapsed();
    assert!(
        forced == Ok(true) && took < crate::STALL_BAR,
        "the admin's force by name of one name that {granted} read locks hold (taken with the \
         ordinary token, within its limits) answered {forced:?} after {took:?}: the server \
         stalled on the force"
    );
}
