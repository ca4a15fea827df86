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

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::harness::real_node_clients::{client, env_or, lease, lock, ms, run_workers, Tally};
use crate::harness::{hold_fenced_then, Held, LetGo, Tracker};
use crate::Servers;
use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::testing::{FaultyLocker, Latency, Violation};
use quorum_lock::{Dsync, LocalLocker, LockMode, LockerConfig, NetLocker};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use tokio::time::{sleep, Instant};

const CLIENTS: usize = 3;
/// SQL and `LocalLocker` nodes of a seed's cluster, by seed.
const LAYOUTS: [(usize, usize); 4] = [(3, 0), (3, 2), (2, 1), (5, 0)];
const MAX_INJECTOR_STEPS: usize = 100_000;
const SEED_LIMIT: Duration = Duration::from_secs(120);

/// One node: its fault wrapper, and the database URL and table prefix
/// behind it (`None` for a `LocalLocker`).
struct Node {
    faulty: Arc<FaultyLocker>,
    sql: Option<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Latency,
    DropApplied,
    DropNotApplied,
    Refuse,
    Hang,
    Partition,
    CutOffHolder,
    /// Every row of a SQL node's entries table deleted, the epoch marker
    /// with them; a `LocalLocker` crashed and, when the fault ends,
    /// restarted empty.
    Reset,
}

const KINDS: [Kind; 8] = [
    Kind::Latency,
    Kind::DropApplied,
    Kind::DropNotApplied,
    Kind::Refuse,
    Kind::Hang,
    Kind::Partition,
    Kind::CutOffHolder,
    Kind::Reset,
];

struct Fault {
    kind: Kind,
    nodes: Vec<usize>,
    owner: String,
    until: Instant,
}

struct Cluster {
    nodes: Vec<Node>,
    servers: Arc<Servers>,
}

fn config(prefix: &str, quarantine: Duration) -> SqlConfig {
    crate::both::config(prefix, lease().validity, quarantine)
}

impl Cluster {
    fn lockers(&self) -> Vec<Arc<dyn NetLocker>> {
        self.nodes
            .iter()
            .map(|n| n.faulty.clone() as Arc<dyn NetLocker>)
            .collect()
    }

    async fn apply(&self, fault: &Fault, rng: &mut SmallRng) {
        for &i in &fault.nodes {
            let node = &self.nodes[i];
            let f = &node.faulty;
            match fault.kind {
                Kind::Latency => f.set_latency(Latency::Uniform {
                    min: Duration::ZERO,
                    max: ms(1..400, rng),
                }),
                Kind::DropApplied => f
                    .drop_replies(rng.random_range(0.1..0.9), true)
                    .expect("a probability"),
                Kind::DropNotApplied => f
                    .drop_replies(rng.random_range(0.1..0.9), false)
                    .expect("a probability"),
                Kind::Refuse => f.set_refuse(true),
                Kind::Hang => f.set_hang(true),
                Kind::Partition | Kind::CutOffHolder => f.partition(fault.owner.clone()),
                Kind::Reset => match &node.sql {
                    Some((url, prefix)) => self.servers.reset(url, prefix).await,
                    None => f.crash(),
                },
            }
        }
    }

    fn undo(&self, fault: &Fault) {
        for &i in &fault.nodes {
            let node = &self.nodes[i];
            let f = &node.faulty;
            match fault.kind {
                Kind::Latency => f.set_latency(Latency::None),
                Kind::DropApplied | Kind::DropNotApplied => {
                    f.drop_replies(0.0, true).expect("a probability")
                }
                Kind::Refuse => f.set_refuse(false),
                Kind::Hang => f.set_hang(false),
                Kind::Partition | Kind::CutOffHolder => {
                    f.heal_partition(&fault.owner);
                }
                Kind::Reset => {
                    if node.sql.is_none() {
                        f.restart();
                    }
                }
            }
        }
    }

    /// Entries left on every node.
    async fn leftovers(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let entries = match &node.sql {
                Some((url, prefix)) => {
                    let locker = SqlLocker::connect(url, config(prefix, Duration::ZERO))
                        .await
                        .expect("connect to list a node");
                    locker.locks().await.expect("a node lists its entries")
                }
                None => node
                    .faulty
                    .local_locker()
                    .expect("a LocalLocker node")
                    .snapshot(),
            };
            out.extend(
                entries
                    .into_iter()
                    .map(|e| format!("node {i}: {} {:?} {}", e.resource, e.mode, e.uid)),
            );
        }
        out
    }
}

#[derive(Debug, Default)]
struct Report {
    layout: String,
    tally: Tally,
    faults: BTreeMap<Kind, usize>,
    violation: Option<String>,
    fencing: Option<String>,
}

impl Report {
    fn summary(&self) -> String {
        format!(
            "{} ops: {} granted, {} gave up, {} losses signalled, {} fencing tokens; faults {:?}",
            self.tally.ops,
            self.tally.acquired,
            self.tally.timeouts,
            self.tally.lost,
            self.tally.fenced,
            self.faults
        )
    }
}

/// Injects faults until `done`, each for a bounded time, then undoes all.
async fn inject(
    cluster: Arc<Cluster>,
    tracker: Arc<Tracker>,
    owners: Vec<String>,
    done: Arc<AtomicBool>,
    report: Arc<Mutex<Report>>,
    seed: u64,
) {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xfa17);
    let n = cluster.nodes.len();
    let mut active: Vec<Fault> = Vec::new();
    // Every seed resets a SQL node's table early on, whatever else it draws.
    let mut first = vec![Kind::Reset];
    for _ in 0..MAX_INJECTOR_STEPS {
        if done.load(Ordering::Relaxed) {
            break;
        }
        sleep(ms(100..800, &mut rng)).await;
        let now = Instant::now();
        active.retain(|f| {
            let over = f.until <= now;
            if over {
                cluster.undo(f);
            }
            !over
        });
        if active.len() >= 3 || !rng.random_bool(0.6) {
            continue;
        }
        let busy: Vec<usize> = active.iter().flat_map(|f| f.nodes.clone()).collect();
        let mut free: Vec<usize> = (0..n).filter(|i| !busy.contains(i)).collect();
        free.shuffle(&mut rng);
        let mut kind = KINDS[rng.random_range(0..KINDS.len())];
        if let Some(forced) = first.pop() {
            kind = forced;
            free.sort_by_key(|&i| cluster.nodes[i].sql.is_none());
        }
        let holders = tracker.holders();
        if kind == Kind::CutOffHolder && holders.is_empty() {
            kind = Kind::Partition;
        }
        let (size, owner, lasts) = match kind {
            Kind::CutOffHolder => (n / 2 + 1, holders[0].clone(), ms(1_600..4_000, &mut rng)),
            Kind::Reset => (1, String::new(), ms(0..1_500, &mut rng)),
            _ => (
                1,
                owners[rng.random_range(0..owners.len())].clone(),
                ms(100..3_000, &mut rng),
            ),
        };
        if free.len() < size {
            continue;
        }
        free.truncate(size);
        let fault = Fault {
            kind,
            nodes: free,
            owner,
            until: now + lasts,
        };
        cluster.apply(&fault, &mut rng).await;
        *lock(&report).faults.entry(kind).or_default() += 1;
        active.push(fault);
    }
    for fault in &active {
        cluster.undo(fault);
    }
}

/// Draws the seed's cluster: how many nodes, and on which database each.
async fn cluster(servers: &Arc<Servers>, seed: u64) -> (Cluster, String) {
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
            sql: Some((url, prefix)),
        });
    }
    for k in 0..local {
        let inner = LocalLocker::with_config(
            format!("local-{k}"),
            LockerConfig {
                validity: lease().validity,
                quarantine: lease().validity,
            },
        );
        let faulty = FaultyLocker::local(Arc::new(inner), seed.wrapping_add(100 + k as u64));
        nodes.push(Node {
            faulty: Arc::new(faulty),
            sql: None,
        });
    }
    nodes.shuffle(&mut rng);
    let layout = format!("SQL nodes {on:?} + {local} LocalLocker nodes");
    (
        Cluster {
            nodes,
            servers: servers.clone(),
        },
        layout,
    )
}

async fn run_seed(servers: &Arc<Servers>, seed: u64, ops: usize) -> Report {
    let (cluster, layout) = cluster(servers, seed).await;
    let cluster = Arc::new(cluster);
    let tracker = Arc::new(Tracker::default());
    let report = Arc::new(Mutex::new(Report {
        layout,
        ..Report::default()
    }));
    let done = Arc::new(AtomicBool::new(false));
    let owners: Vec<String> = (0..CLIENTS)
        .map(|i| format!("s{seed}-client-{i}"))
        .collect();
    let clients: Vec<(String, Dsync)> = owners
        .iter()
        .enumerate()
        .map(|(i, owner)| {
            let ds = client(
                cluster.lockers(),
                owner,
                seed.wrapping_mul(31).wrapping_add(i as u64),
            );
            (owner.clone(), ds)
        })
        .collect();
    let injector = tokio::spawn(inject(
        cluster.clone(),
        tracker.clone(),
        owners,
        done.clone(),
        report.clone(),
        seed,
    ));
    let tally = run_workers(
        clients,
        &tracker,
        ops,
        |i| seed.wrapping_mul(1000).wrapping_add(i as u64) ^ 0x5ec1,
        injector,
        &done,
        SEED_LIMIT,
    )
    .await;
    lock(&report).tally = tally;
    sleep(lease().validity + Duration::from_secs(1)).await;
    let left = cluster.leftovers().await;
    let mut report = Arc::try_unwrap(report)
        .map(|m| m.into_inner().unwrap_or_else(PoisonError::into_inner))
        .unwrap_or_else(|_| panic!("seed {seed}: the report is still shared"));
    if !left.is_empty() {
        report.tally.problems.push(format!(
            "entries still on the nodes a validity after every release: {left:?}"
        ));
    }
    report.violation = tracker.history.check().err().map(|v| v.to_string());
    report.fencing = tracker.history.check_fencing().err().map(|v| v.to_string());
    report
}

fn replay(seed: u64, ops: usize) -> String {
    format!(
        "replay: SQL_SAFETY_SEED={seed} SQL_SAFETY_OPS={ops} cargo test --all-features --test sql safety::"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_faults_with_sql_nodes_never_break_exclusion_or_hide_a_loss() {
    let ops = env_or("SQL_SAFETY_OPS", 15) as usize;
    let seeds: Vec<u64> = match std::env::var("SQL_SAFETY_SEED") {
        Ok(_) => vec![env_or("SQL_SAFETY_SEED", 0)],
        Err(_) => (0..env_or("SQL_SAFETY_SEEDS", 2)).collect(),
    };
    let Some(servers) = Servers::start() else {
        return;
    };
    let mut resets = 0;
    for &seed in &seeds {
        let report = run_seed(&servers, seed, ops).await;
        let context = format!("seed {seed} ({}): {}", report.layout, report.summary());
        if let Some(v) = &report.violation {
            panic!(
                "{context}\nmutual exclusion violated: {v}\n{}",
                replay(seed, ops)
            );
        }
        if let Some(v) = &report.fencing {
            panic!("{context}\n{v}\n{}", replay(seed, ops));
        }
        assert!(
            report.tally.problems.is_empty(),
            "{context}\n{}\n{}",
            report.tally.problems.join("\n"),
            replay(seed, ops)
        );
        assert_eq!(
            report.tally.ops,
            ops,
            "{context}: not every op ran\n{}",
            replay(seed, ops)
        );
        assert!(report.tally.acquired > 0, "{context}: nothing was granted");
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
                sql: Some(t.clone()),
            })
            .collect(),
        servers: servers.clone(),
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
