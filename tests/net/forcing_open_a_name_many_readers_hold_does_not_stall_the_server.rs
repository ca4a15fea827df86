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
//! Four client connections take 10,000 read locks each on `x` (40,000
//! holders, about 90 MiB of the 1 GiB table, each connection within its
//! 64 MiB). The admin then forces `x` open by name. On the debug build the
//! force takes about 8 s (its call times out after 5 s, when the test's
//! runtime, which the server shares, gets to its timer); 40,000 holders is
//! far from the most a client may make, and the time grows with their
//! square. (With the holders gathered through a `HashSet` instead, the
//! force answers at once: the quadratic `contains` is the cause.)
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use quorum_lock::net::{RemoteLocker, ServerConfig};
use quorum_lock::{LockArgs, NetLocker};

use crate::capped::{self, ADMIN};
use crate::node::{start, TOKEN};

/// Client connections that take read locks.
const CONNECTIONS: usize = 4;

/// Read holders per client connection.
const PER_CONNECTION: usize = 10_000;

fn args(uid: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec!["x".to_owned()].into(),
        owner: "readers".into(),
        source: "tests/net/forcing_open_a_name_many_readers_hold_does_not_stall_the_server.rs"
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
async fn forcing_open_a_name_many_readers_hold_ends_at_once_and_stalls_nobody() {
    let config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    let node = start(config).await;
    let mut readers = Vec::new();
    for _ in 0..CONNECTIONS {
        readers.push(Arc::new(capped::connect(&node.addr, TOKEN).await));
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

    let admin = capped::connect(&node.addr, ADMIN).await;
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
        forced == Ok(true) && took < Duration::from_secs(2),
        "the admin's force by name of one name that {granted} read locks hold (taken with the \
         ordinary token, within its limits) answered {forced:?} after {took:?}: the server \
         stalled on the force"
    );
}
