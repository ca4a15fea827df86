//! Randomized safety with SQL databases in the cluster: clients take read
//! and write locks on a few names while an injector slows, drops, refuses,
//! hangs and partitions calls (`FaultyLocker` around every node), resets a
//! node's lock table (what a crash does to PostgreSQL's unlogged table, a
//! failover or a restored backup: every entry forgotten, the epoch marker
//! with them), and crashes in-process `LocalLocker` nodes. Each seed draws
//! a cluster of PostgreSQL and MariaDB nodes (each node its own tables on
//! one of two servers), possibly mixed with `LocalLocker`s. For every seed,
//! no two holders may ever believe they hold conflicting locks at once
//! (`History::check`), fencing tokens must grow between conflicting
//! holders, a holder must be told of every loss that `unlock()` reports,
//! and nothing may be left on any node a validity after the last release.
//!
//! Real databases run in real time, so a seed decides the choices but not
//! the interleaving: a failing seed is printed with the line to run it
//! again. Sizes: `SQL_SAFETY_SEEDS` (default 2) seeds of `SQL_SAFETY_OPS`
//! (default 15) lock operations each; `SQL_SAFETY_SEED=n` runs seed `n`
//! alone.

use std::sync::Arc;
use std::time::Duration;

use crate::harness::real_node_clients::{client, lease};
use crate::harness::real_node_safety::{Backend, Cluster, Kind, Node, Run};
use crate::harness::{hold_fenced_then, Held, LetGo, Tracker};
use crate::Servers;
use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::testing::{FaultyLocker, Violation};
use quorum_lock::{LockInfo, LockMode, NetLocker};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::sleep;

/// SQL and `LocalLocker` nodes of a seed's cluster, by seed.
const LAYOUTS: [(usize, usize); 4] = [(3, 0), (3, 2), (2, 1), (5, 0)];

const RUN: Run = Run {
    env: "SQL",
    binary: "sql",
    default_seeds: 2,
    client_salt: 0x5ec1,
};

fn config(prefix: &str, quarantine: Duration) -> SqlConfig {
    crate::both::config(prefix, lease().validity, quarantine)
}

/// The two database servers every node's tables are on.
struct SqlNodes {
    servers: Arc<Servers>,
}

impl Backend for SqlNodes {
    /// The database URL and table prefix of a node.
    type Server = (String, String);

    const OWN_KINDS: &'static [Kind] = &[Kind::Reset];

    /// Every seed resets a SQL node's table early on.
    fn first(_seed: u64) -> Vec<Kind> {
        vec![Kind::Reset]
    }

    async fn apply(&self, kind: Kind, (url, prefix): &Self::Server) -> Result<(), String> {
        assert_eq!(kind, Kind::Reset, "the one fault of a SQL table");
        self.servers.try_reset(url, prefix).await
    }

    /// A reset table stays empty until the next grant.
    fn undo(&self, _kind: Kind, _table: &Self::Server) {}

    async fn entries(&self, (url, prefix): &Self::Server) -> Vec<LockInfo> {
        let locker = SqlLocker::connect(url, config(prefix, Duration::ZERO))
            .await
            .expect("connect to list a node");
        locker.locks().await.expect("a node lists its entries")
    }
}

/// Draws the seed's cluster: how many nodes, and on which database each.
async fn cluster(servers: &Arc<Servers>, seed: u64) -> (Cluster<SqlNodes>, String) {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xc105);
    let (sql, local) = LAYOUTS[seed as usize % LAYOUTS.len()];
    let mut nodes = Vec::new();
    let mut on = Vec::new();
    for k in 0..sql {
        let url = if rng.random_bool(0.5) {
            servers.pg.clone()
        } else {
            servers.maria.clone()
        };
        on.push(if url.starts_with("postgres") {
            "pg"
        } else {
            "maria"
        });
        let prefix = format!("safety_{seed}_{k}_");
        let inner = SqlLocker::connect(&url, config(&prefix, lease().validity))
            .await
            .expect("a database to connect to");
        let faulty = FaultyLocker::new(Arc::new(inner), seed.wrapping_add(k as u64));
        nodes.push(Node {
            faulty: Arc::new(faulty),
            server: Some((url, prefix)),
        });
    }
    let layout = format!("SQL nodes {on:?} + {local} LocalLocker nodes");
    let backend = SqlNodes {
        servers: servers.clone(),
    };
    (Cluster::new(backend, nodes, local, seed, &mut rng), layout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_faults_with_sql_nodes_never_break_exclusion_or_hide_a_loss() {
    let (ops, seeds) = (RUN.ops(), RUN.seeds());
    let Some(servers) = Servers::start() else {
        return;
    };
    let mut resets = 0;
    for &seed in &seeds {
        let (cluster, layout) = cluster(&servers, seed).await;
        let report = RUN.seed(&Arc::new(cluster), layout, seed, ops).await;
        let context = RUN.check(seed, ops, &report);
        resets += report.faults.get(&Kind::Reset).copied().unwrap_or(0);
        eprintln!("{context}");
    }
    assert!(resets > 0, "no table was ever reset");
}

/// A holder cut off from every node, then a majority of SQL nodes' tables
/// reset, then another client asking for the lock: with `quarantine` zero
/// the reset nodes grant it while the holder still believes it holds it,
/// which the `History` check must report; with a quarantine of one
/// validity they refuse until the holder has been told.
async fn majority_reset(quarantine: Duration) -> Option<Result<(), Violation>> {
    let servers = Servers::start()?;
    let tag = rand::random::<u32>();
    let mut lockers: Vec<Arc<dyn NetLocker>> = Vec::new();
    let mut faulty = Vec::new();
    let mut tables = Vec::new();
    for k in 0..3 {
        let url = if k % 2 == 0 {
            servers.pg.clone()
        } else {
            servers.maria.clone()
        };
        let prefix = format!("reset_{tag}_{k}_");
        let inner = SqlLocker::connect(&url, config(&prefix, quarantine))
            .await
            .expect("a database");
        let f = Arc::new(FaultyLocker::new(Arc::new(inner), k));
        lockers.push(f.clone());
        faulty.push(f);
        tables.push((url, prefix));
    }
    let cluster = Cluster {
        nodes: faulty
            .iter()
            .zip(&tables)
            .map(|(f, t)| Node {
                faulty: f.clone(),
                server: Some(t.clone()),
            })
            .collect(),
        backend: SqlNodes {
            servers: servers.clone(),
        },
    };
    let tracker = Arc::new(Tracker::default());
    let holder = client(cluster.lockers(), "holder", 1);
    let other = client(cluster.lockers(), "other", 2);
    let held = Held::acquire(
        &holder.rw_mutex(["x"]).expect("a name"),
        LockMode::Write,
        Duration::from_secs(5),
    )
    .await
    .expect("the first lock");
    let hold = {
        let tracker = tracker.clone();
        tokio::spawn(async move {
            hold_fenced_then(
                &tracker,
                "holder",
                held,
                Duration::from_secs(4),
                LetGo::Unlock,
                false,
            )
            .await
        })
    };
    sleep(Duration::from_millis(100)).await;
    // The holder's refreshes stop reaching anyone; two tables forget it.
    for f in &faulty {
        f.partition("holder".to_owned());
    }
    servers.reset(&tables[0].0, &tables[0].1).await;
    servers.reset(&tables[1].0, &tables[1].1).await;
    let mutex = other.rw_mutex(["x"]).expect("a name");
    if let Ok(held) = Held::acquire(&mutex, LockMode::Write, Duration::from_secs(3)).await {
        let _ = hold_fenced_then(
            &tracker,
            "other",
            held,
            Duration::from_millis(100),
            LetGo::Unlock,
            false,
        )
        .await;
    }
    let _ = hold.await;
    Some(tracker.history.check())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_reset_without_quarantine_is_caught_by_the_check() {
    let Some(verdict) = majority_reset(Duration::ZERO).await else {
        return;
    };
    assert!(
        verdict.is_err(),
        "two tables forgot a held lock and granted it again at once, yet the check saw no overlap"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_reset_with_quarantine_waits_for_the_holders_loss() {
    let Some(verdict) = majority_reset(lease().validity).await else {
        return;
    };
    verdict.expect("the reset tables refuse until the cut-off holder has been told");
}
