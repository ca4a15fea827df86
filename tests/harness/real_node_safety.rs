//! The body of the randomized safety tests over real servers (Redis nodes,
//! SQL databases), shared by both: a seed's cluster of fault-wrapped nodes,
//! the injector that slows, drops, refuses, hangs and partitions their
//! calls and adds each backend's own faults (a frozen or restarted Redis
//! process, a reset SQL table), one seed's run beside the clients of
//! [`real_node_clients`](super::real_node_clients), and the checks every
//! seed must pass. Each test keeps its own servers, layouts, seeds and
//! settings (a [`Run`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorum_lock::testing::{FaultyLocker, Latency};
use quorum_lock::{Dsync, LocalLocker, LockInfo, LockerConfig, NetLocker};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use tokio::time::{sleep, Instant};

use super::real_node_clients::{client, env_or, lease, lock, ms, run_workers, Tally};
use super::Tracker;

const CLIENTS: usize = 3;
/// Upper bound on injector steps, in case the workers never finish.
const MAX_INJECTOR_STEPS: usize = 100_000;
/// Longest a seed may run before it counts as stuck.
const SEED_LIMIT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Latency,
    DropApplied,
    DropNotApplied,
    Refuse,
    Hang,
    Partition,
    /// Partition the oldest holder from a majority, for longer than the
    /// lease trusts: the race between its loss and the next grant.
    CutOffHolder,
    /// SIGSTOP of a Redis process, SIGCONT when the fault ends; a
    /// `LocalLocker` hangs instead.
    Pause,
    /// A Redis process killed and started again without persistence; a
    /// `LocalLocker` crashed and, when the fault ends, restarted empty.
    Restart,
    /// Every row of a SQL node's entries table deleted, the epoch marker
    /// with them; a `LocalLocker` crashed and, when the fault ends,
    /// restarted empty.
    Reset,
}

/// The faults every backend injects through the `FaultyLocker` alone.
const WRAPPER_KINDS: [Kind; 7] = [
    Kind::Latency,
    Kind::DropApplied,
    Kind::DropNotApplied,
    Kind::Refuse,
    Kind::Hang,
    Kind::Partition,
    Kind::CutOffHolder,
];

/// What a test's nodes stand on: how its own faults reach a server, and
/// what a server still holds.
pub trait Backend: Send + Sync + 'static {
    /// What stands behind a node that is not a `LocalLocker`.
    type Server: Send + Sync + 'static;
    /// The kinds of fault of this backend's own, drawn after the
    /// `FaultyLocker`'s.
    const OWN_KINDS: &'static [Kind];
    /// The kinds every seed injects first, whatever else it draws (last
    /// first), each on a node with a server.
    fn first(seed: u64) -> Vec<Kind>;
    /// Starts a fault of this backend's own kinds on `server`, or says why
    /// it could not.
    fn apply(
        &self,
        kind: Kind,
        server: &Self::Server,
    ) -> impl Future<Output = Result<(), String>> + Send;
    /// Ends a fault of this backend's own kinds on `server`.
    fn undo(&self, kind: Kind, server: &Self::Server);
    /// The entries `server` holds for this seed's nodes.
    fn entries(&self, server: &Self::Server) -> impl Future<Output = Vec<LockInfo>> + Send;
}

/// One node of a seed's cluster: its fault wrapper, and the server behind
/// it (`None` for a `LocalLocker`).
pub struct Node<S> {
    pub faulty: Arc<FaultyLocker>,
    pub server: Option<S>,
}

/// One injected fault and when it ends.
struct Fault {
    kind: Kind,
    nodes: Vec<usize>,
    owner: String,
    until: Instant,
}

/// What a seed runs on.
pub struct Cluster<B: Backend> {
    pub backend: B,
    pub nodes: Vec<Node<B::Server>>,
}

impl<B: Backend> Cluster<B> {
    /// The `nodes` on servers of `backend` and `local` `LocalLocker`s
    /// (their faults drawn from `seed + 100` on), in an order drawn from
    /// `rng`.
    pub fn new(
        backend: B,
        mut nodes: Vec<Node<B::Server>>,
        local: usize,
        seed: u64,
        rng: &mut SmallRng,
    ) -> Self {
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
                server: None,
            });
        }
        nodes.shuffle(rng);
        Cluster { backend, nodes }
    }

    pub fn lockers(&self) -> Vec<Arc<dyn NetLocker>> {
        self.nodes
            .iter()
            .map(|n| n.faulty.clone() as Arc<dyn NetLocker>)
            .collect()
    }

    /// Starts `fault` on its nodes, or says why a backend's own could not
    /// start.
    async fn apply(&self, fault: &Fault, rng: &mut SmallRng) -> Result<(), String> {
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
                kind => match &node.server {
                    Some(server) => self.backend.apply(kind, server).await?,
                    None if kind == Kind::Pause => f.set_hang(true),
                    None => f.crash(),
                },
            }
        }
        Ok(())
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
                kind => match &node.server {
                    Some(server) => self.backend.undo(kind, server),
                    None if kind == Kind::Pause => f.set_hang(false),
                    // A crashed LocalLocker comes back empty, in its
                    // quarantine.
                    None => f.restart(),
                },
            }
        }
    }

    /// Entries left on every node.
    async fn leftovers(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let entries = match &node.server {
                Some(server) => self.backend.entries(server).await,
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

/// What one seed did and what went wrong in it.
#[derive(Debug, Default)]
pub struct Report {
    pub layout: String,
    pub tally: Tally,
    pub faults: BTreeMap<Kind, usize>,
    /// What the test adds of its own to the summary (e.g. which paths its
    /// Redis lockers took).
    pub notes: String,
    pub violation: Option<String>,
    pub fencing: Option<String>,
    /// The fault the injector is starting, while it starts it.
    injecting: Option<String>,
    /// Faults the injector could not start, and why.
    injector_problems: Vec<String>,
}

impl Report {
    pub fn add(&mut self, other: &Report) {
        self.tally.add(&other.tally);
        for (kind, n) in &other.faults {
            *self.faults.entry(*kind).or_default() += n;
        }
    }

    pub fn summary(&self) -> String {
        format!(
            "{} ops: {} granted ({} writes), {} timed out, {} losses signalled, {} fencing tokens; \
             faults {:?}{}",
            self.tally.ops,
            self.tally.acquired,
            self.tally.writes,
            self.tally.timeouts,
            self.tally.lost,
            self.tally.fenced,
            self.faults,
            self.notes
        )
    }
}

/// Injects faults until `done`, each for a bounded time, then undoes all.
async fn inject<B: Backend>(
    cluster: Arc<Cluster<B>>,
    tracker: Arc<Tracker>,
    owners: Vec<String>,
    done: Arc<AtomicBool>,
    report: Arc<Mutex<Report>>,
    seed: u64,
) {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xfa17);
    let n = cluster.nodes.len();
    let mut active: Vec<Fault> = Vec::new();
    let mut first = B::first(seed);
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
        let drawn = rng.random_range(0..WRAPPER_KINDS.len() + B::OWN_KINDS.len());
        let mut kind = match WRAPPER_KINDS.get(drawn) {
            Some(&kind) => kind,
            None => B::OWN_KINDS[drawn - WRAPPER_KINDS.len()],
        };
        if let Some(forced) = first.pop() {
            kind = forced;
            // On a node with a server, which every layout has.
            free.sort_by_key(|&i| cluster.nodes[i].server.is_none());
        }
        let holders = tracker.holders();
        if kind == Kind::CutOffHolder && holders.is_empty() {
            kind = Kind::Partition;
        }
        let (size, owner, lasts) = match kind {
            Kind::CutOffHolder => (n / 2 + 1, holders[0].clone(), ms(1_600..4_000, &mut rng)),
            Kind::Restart | Kind::Reset => (1, String::new(), ms(0..1_500, &mut rng)),
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
        let what = format!("{kind:?} on nodes {:?}", fault.nodes);
        lock(&report).injecting = Some(what.clone());
        let applied = cluster.apply(&fault, &mut rng).await;
        let mut r = lock(&report);
        r.injecting = None;
        match applied {
            Ok(()) => *r.faults.entry(kind).or_default() += 1,
            Err(e) => r
                .injector_problems
                .push(format!("{what} did not start: {e}")),
        }
        drop(r);
        active.push(fault);
    }
    for fault in &active {
        cluster.undo(fault);
    }
}

/// A test's settings: the names of its environment variables and of its
/// test binary, how many seeds it runs by default, and what its clients'
/// seeds are salted with.
pub struct Run {
    /// `REDIS` reads `REDIS_SAFETY_SEEDS`, `REDIS_SAFETY_OPS` and
    /// `REDIS_SAFETY_SEED`.
    pub env: &'static str,
    /// The `--test` to run a seed again with.
    pub binary: &'static str,
    pub default_seeds: u64,
    pub client_salt: u64,
}

impl Run {
    /// Lock operations a seed: `{env}_SAFETY_OPS`, or 15.
    pub fn ops(&self) -> usize {
        env_or(&format!("{}_SAFETY_OPS", self.env), 15) as usize
    }

    /// `{env}_SAFETY_SEED` alone, or `{env}_SAFETY_SEEDS` seeds from 0.
    pub fn seeds(&self) -> Vec<u64> {
        let one = format!("{}_SAFETY_SEED", self.env);
        match std::env::var(&one) {
            Ok(_) => vec![env_or(&one, 0)],
            Err(_) => {
                (0..env_or(&format!("{}_SAFETY_SEEDS", self.env), self.default_seeds)).collect()
            }
        }
    }

    fn replay(&self, seed: u64, ops: usize) -> String {
        let (env, binary) = (self.env, self.binary);
        format!(
            "replay: {env}_SAFETY_SEED={seed} {env}_SAFETY_OPS={ops} cargo test --all-features --test {binary} safety::"
        )
    }

    /// Runs one seed of `ops` operations on `cluster`, laid out as
    /// `layout`: the clients and the injector, then the checks of the
    /// history and of what is left on the nodes a validity later.
    pub async fn seed<B: Backend>(
        &self,
        cluster: &Arc<Cluster<B>>,
        layout: String,
        seed: u64,
        ops: usize,
    ) -> Report {
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
            |i| seed.wrapping_mul(1000).wrapping_add(i as u64) ^ self.client_salt,
            injector,
            || lock(&report).injecting.clone(),
            &done,
            SEED_LIMIT,
        )
        .await;
        // Every entry of a released or dropped lock is gone one validity
        // after the last release, wherever it was.
        sleep(lease().validity + Duration::from_secs(1)).await;
        let left = cluster.leftovers().await;
        // The injector has ended or been aborted: what it wrote is final.
        let mut report = std::mem::take(&mut *lock(&report));
        report.tally = tally;
        let injector_problems = std::mem::take(&mut report.injector_problems);
        report.tally.problems.extend(injector_problems);
        if !left.is_empty() {
            report.tally.problems.push(format!(
                "entries still on the nodes a validity after every release: {left:?}"
            ));
        }
        report.violation = tracker.history.check().err().map(|v| v.to_string());
        report.fencing = tracker.history.check_fencing().err().map(|v| v.to_string());
        report
    }

    /// The checks every seed passes: mutual exclusion, growing fencing
    /// tokens between conflicting holders, no problem the clients found,
    /// every operation run and something granted. Returns the seed's
    /// summary.
    pub fn check(&self, seed: u64, ops: usize, report: &Report) -> String {
        let context = format!("seed {seed} ({}): {}", report.layout, report.summary());
        if let Some(v) = &report.violation {
            panic!(
                "{context}\nmutual exclusion violated: {v}\n{}",
                self.replay(seed, ops)
            );
        }
        if let Some(v) = &report.fencing {
            panic!("{context}\n{v}\n{}", self.replay(seed, ops));
        }
        assert!(
            report.tally.problems.is_empty(),
            "{context}\n{}\n{}",
            report.tally.problems.join("\n"),
            self.replay(seed, ops)
        );
        assert_eq!(
            report.tally.ops,
            ops,
            "{context}: not every op ran\n{}",
            self.replay(seed, ops)
        );
        assert!(report.tally.acquired > 0, "{context}: nothing was granted");
        context
    }
}
