//! Randomized safety with real Redis nodes in the cluster: clients take
//! read and write locks on a few names while an injector slows, drops,
//! refuses, hangs and partitions calls (`FaultyLocker` around every node),
//! freezes Redis processes with SIGSTOP, restarts them without persistence,
//! and crashes in-process `LocalLocker` nodes. Each seed draws a cluster of
//! Redis nodes, possibly mixed with `LocalLocker`s (3 to 5 nodes, even sizes
//! too). For every seed, no two holders may ever believe they hold
//! conflicting locks at once (`History::check`), fencing tokens must grow
//! between conflicting holders, a holder must be told of every loss that
//! `unlock()` reports, and nothing may be left on any node a validity after
//! the last release.
//!
//! Real processes run in real time, so a seed decides the choices but not
//! the interleaving: a failing seed is printed with the line to run it
//! again, which usually, not always, fails again. Sizes: `REDIS_SAFETY_SEEDS`
//! (default 3) seeds of `REDIS_SAFETY_OPS` (default 15) lock operations
//! each; `REDIS_SAFETY_SEED=n` runs seed `n` alone. The defaults take about
//! 20 s; a soak: `REDIS_SAFETY_SEEDS=100 cargo test --all-features --test
//! redis_safety`.
#![cfg(all(feature = "redis", feature = "testing"))]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::harness::real_node_clients::{lease, lock};
use crate::harness::real_node_safety::{Backend, Cluster, Kind, Node, Report, Run};
use crate::harness::{Held, Tracker};
use crate::redis_support::RedisServer;
use quorum_lock::redis::{RedisConfig, RedisLocker, RedisPaths};
use quorum_lock::testing::{FaultyLocker, Violation};
use quorum_lock::{Dsync, Lease, LockInfo, LockMode, NetLocker, Timeouts};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use tokio::time::timeout;

/// Redis processes started once and shared by every seed (each seed keys
/// its locks under its own prefix).
const REDIS_SERVERS: usize = 5;
/// Redis and `LocalLocker` nodes of a seed's cluster, by seed.
const LAYOUTS: [(usize, usize); 5] = [(3, 0), (5, 0), (3, 2), (2, 2), (2, 1)];

const RUN: Run = Run {
    env: "REDIS",
    binary: "redis",
    default_seeds: 3,
    client_salt: 0x5eed,
};

/// The Redis servers of a seed, and the prefix it keys its locks under.
struct RedisNodes {
    servers: Arc<Vec<Mutex<RedisServer>>>,
    prefix: String,
}

impl Backend for RedisNodes {
    /// The index of the node's Redis server, and the Redis locker behind
    /// its fault wrapper (which paths it took).
    type Server = (usize, Arc<RedisLocker>);

    const OWN_KINDS: &'static [Kind] = &[Kind::Pause, Kind::Restart];

    /// Every seed freezes and restarts a Redis process early on.
    fn first(seed: u64) -> Vec<Kind> {
        if seed.is_multiple_of(2) {
            vec![Kind::Restart, Kind::Pause]
        } else {
            vec![Kind::Pause, Kind::Restart]
        }
    }

    async fn apply(&self, kind: Kind, &(s, _): &Self::Server) -> Result<(), String> {
        match kind {
            Kind::Pause => lock(&self.servers[s]).pause(),
            Kind::Restart => {
                tokio::task::block_in_place(|| lock(&self.servers[s]).restart_empty());
            }
            other => unreachable!("{other:?} is not a fault of a Redis server"),
        }
        Ok(())
    }

    fn undo(&self, kind: Kind, &(s, _): &Self::Server) {
        // A restarted Redis is up already.
        if kind == Kind::Pause {
            lock(&self.servers[s]).resume();
        }
    }

    /// Entries on the node under this seed's prefix.
    async fn entries(&self, &(s, _): &Self::Server) -> Vec<LockInfo> {
        let url = lock(&self.servers[s]).url();
        let config = RedisConfig {
            prefix: self.prefix.clone(),
            quarantine: Duration::ZERO,
            ..RedisConfig::default()
        };
        let locker = RedisLocker::connect(&url, config)
            .await
            .expect("connect to list a node");
        locker.locks().await.expect("a node lists its entries")
    }
}

fn add_paths(sum: &mut RedisPaths, more: &RedisPaths) {
    sum.fast_grants += more.fast_grants;
    sum.fast_misses += more.fast_misses;
    sum.script_grants += more.script_grants;
    sum.fast_unlocks += more.fast_unlocks;
    sum.script_unlocks += more.script_unlocks;
}

/// The servers shared by every seed; their first quarantine is waited out
/// by the first seed's clients.
fn servers() -> Option<Arc<Vec<Mutex<RedisServer>>>> {
    let servers = RedisServer::start_many(REDIS_SERVERS)?;
    Some(Arc::new(servers.into_iter().map(Mutex::new).collect()))
}

/// Draws the seed's cluster: how many nodes, and which are Redis.
async fn cluster(
    servers: &Arc<Vec<Mutex<RedisServer>>>,
    seed: u64,
) -> (Cluster<RedisNodes>, String) {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xc105);
    // In turn, so that the first seeds already cover every layout but one.
    let (redis, local) = LAYOUTS[seed as usize % LAYOUTS.len()];
    let prefix = format!("redis-safety-{seed}:");
    let config = RedisConfig {
        prefix: prefix.clone(),
        validity: lease().validity,
        // At least the validity: nodes restart with locks held here.
        quarantine: lease().validity,
        call_timeout: Duration::from_millis(400),
        ..RedisConfig::default()
    };
    let mut picked: Vec<usize> = (0..REDIS_SERVERS).collect();
    picked.shuffle(&mut rng);
    let mut nodes = Vec::new();
    for (k, &s) in picked[..redis].iter().enumerate() {
        let url = lock(&servers[s]).url();
        let inner = Arc::new(RedisLocker::new(&url, config.clone()).expect("a valid URL"));
        let faulty = FaultyLocker::new(inner.clone(), seed.wrapping_add(k as u64));
        nodes.push(Node {
            faulty: Arc::new(faulty),
            server: Some((s, inner)),
        });
    }
    let layout = format!("{redis} Redis + {local} LocalLocker nodes");
    let backend = RedisNodes {
        servers: servers.clone(),
        prefix,
    };
    (Cluster::new(backend, nodes, local, seed, &mut rng), layout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_faults_with_redis_nodes_never_break_exclusion_or_hide_a_loss() {
    let (ops, seeds) = (RUN.ops(), RUN.seeds());
    let Some(servers) = servers() else {
        return;
    };
    let started = std::time::Instant::now();
    let mut total = Report::default();
    let mut paths = RedisPaths::default();
    for &seed in &seeds {
        let (cluster, layout) = cluster(&servers, seed).await;
        let cluster = Arc::new(cluster);
        let mut report = RUN.seed(&cluster, layout, seed, ops).await;
        // The paths the seed's Redis lockers took, summed.
        let mut seed_paths = RedisPaths::default();
        for (_, locker) in cluster.nodes.iter().filter_map(|n| n.server.as_ref()) {
            add_paths(&mut seed_paths, &locker.paths());
        }
        report.notes = format!("; paths {seed_paths:?}");
        add_paths(&mut paths, &seed_paths);
        let context = RUN.check(seed, ops, &report);
        println!("{context}");
        total.add(&report);
    }
    total.notes = format!("; paths {paths:?}");
    println!(
        "{} seeds x {ops} ops in {:?}: {}",
        seeds.len(),
        started.elapsed(),
        total.summary()
    );
    // Both paths of a grant were exercised: the fast path on free names,
    // the script behind holders, waiters, readers, several names and
    // quarantines; and the unlock script. The unlock's fast path is taken
    // here too, but not in every run (a refresh, every 250 ms, or anyone
    // else asking turns a fast-path key into a hash first), so it is
    // printed rather than asserted; tests/redis/fastpath.rs asserts it.
    let p = &paths;
    assert!(
        p.fast_grants > 0 && p.script_grants > 0 && p.script_unlocks > 0,
        "a path of the Redis locker was never taken: {p:?}"
    );
    for kind in [Kind::Pause, Kind::Restart] {
        assert!(
            total.faults.get(&kind) > Some(&0),
            "{kind:?} never injected: {}",
            total.summary()
        );
    }
}

/// A holder cut off from every node, then a majority of Redis nodes
/// restarted empty, then another client asking for the lock: with
/// `quarantine` zero the restarted nodes grant it while the holder still
/// believes it holds it, which the `History` check must report; with a
/// quarantine of one validity they refuse until the holder has been told.
/// Returns the check's verdict with the holder's and the other's uids.
async fn majority_restart(quarantine: Duration) -> Option<(Result<(), Violation>, String, String)> {
    let servers = RedisServer::start_many(3)?;
    // Trusted for 3.5 s: far longer than restarting two servers takes.
    let lease = Lease {
        validity: Duration::from_secs(4),
        refresh_interval: Duration::from_millis(500),
        safety_margin: Duration::from_millis(500),
    };
    let config = RedisConfig {
        validity: lease.validity,
        quarantine,
        call_timeout: Duration::from_millis(400),
        ..RedisConfig::default()
    };
    let nodes: Vec<Arc<FaultyLocker>> = servers
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let inner = RedisLocker::new(&s.url(), config.clone()).expect("a valid URL");
            Arc::new(FaultyLocker::new(Arc::new(inner), i as u64))
        })
        .collect();
    let lockers: Vec<Arc<dyn NetLocker>> = nodes
        .iter()
        .map(|n| n.clone() as Arc<dyn NetLocker>)
        .collect();
    let client = |owner: &str| {
        Dsync::builder(lockers.clone())
            .owner(owner)
            .lease(lease)
            .timeouts(Timeouts {
                acquire: Duration::from_millis(400),
                refresh: Duration::from_millis(300),
                ..Timeouts::default()
            })
            .build()
            .expect("valid client settings")
    };
    let (holder, other) = (client("holder"), client("other"));
    let servers: Vec<Mutex<RedisServer>> = servers.into_iter().map(Mutex::new).collect();
    let tracker = Arc::new(Tracker::default());
    // Fresh servers are in quarantine too, when there is one.
    let held = holder
        .rw_mutex(["x"])
        .unwrap()
        .lock_timeout(Duration::from_secs(15))
        .await
        .expect("the holder's lock");
    let held = Held::Write(held);
    tracker.begin("holder", &held);
    let uid = held.uid().to_owned();
    let told = tokio::spawn({
        let (lost, tracker, uid) = (held.lost(), tracker.clone(), uid.clone());
        async move {
            lost.await;
            tracker.end(&uid, true);
        }
    });
    for node in &nodes {
        node.partition("holder");
    }
    for server in &servers[..2] {
        tokio::task::block_in_place(|| lock(server).restart_empty());
    }
    let granted = other
        .rw_mutex(["x"])
        .unwrap()
        .lock_timeout(Duration::from_secs(15))
        .await
        .expect("the other client gets the lock in the end");
    let other_uid = granted.uid().to_owned();
    tracker.history.acquired(&other_uid, ["x"], LockMode::Write);
    tracker.end(&other_uid, false);
    timeout(Duration::from_secs(15), told)
        .await
        .expect("the holder is told within 15 s")
        .expect("joins");
    granted.unlock().await.expect("unlock");
    Some((tracker.history.check(), uid, other_uid))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_restarted_without_quarantine_is_caught_by_the_check() {
    if let Some((checked, holder, other)) = majority_restart(Duration::ZERO).await {
        let violation = checked.expect_err("no violation found without quarantine");
        assert_eq!(
            (
                violation.earlier.holder.as_str(),
                violation.later.holder.as_str()
            ),
            (holder.as_str(), other.as_str()),
            "{violation}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_restarted_with_quarantine_waits_for_the_holders_loss() {
    if let Some((checked, _, _)) = majority_restart(Duration::from_secs(4)).await {
        checked.expect("the quarantine kept the other client out until the holder was told");
    }
}
