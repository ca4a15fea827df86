#![cfg(feature = "testing")]
//! Randomized safety test: clients take read and write locks on a few
//! resources while a fault injector slows, drops, refuses, hangs,
//! partitions, crashes and restarts lock servers. For every seed, no two
//! holders may ever believe they hold conflicting locks at once, and no
//! holder may lose its lock without being told.
//!
//! Sizes: `SAFETY_SEEDS` (default 200, or 100 in a debug build) seeds of
//! `SAFETY_OPS` (default 150) lock operations each, counted over all
//! clients; `SAFETY_SEED=n` runs seed `n` alone, exactly as it ran among the
//! others. The debug defaults keep the README's test command short (CI
//! also runs the release soak below, 200 seeds of 1,000 operations): an
//! operation costs about 1.3 ms
//! of CPU in debug, mostly locker calls (polling waiters, and releases that
//! keep retrying on faulty nodes). A longer soak, about 75 s per million
//! operations in release on two cores:
//! `SAFETY_SEEDS=2000 SAFETY_OPS=3000 cargo test --release --all-features --test safety safety_randomized::`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::harness::{client, hold_fenced_then, lease, Held, LetGo, Tracker};
use quorum_lock::testing::{CallKind, EventKind, Latency, TestCluster};
use quorum_lock::{Error, LockMode, LockerConfig};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use tokio::time::{sleep, Instant};

/// Lockers in the cluster, for every mix but [`Mix::Restarts`].
const NODES: usize = 5;
const CLIENTS: usize = 4;
const RESOURCES: [&str; 4] = ["a", "b", "c", "d"];
/// Upper bound on fault injector steps, in case the workers never finish.
const MAX_INJECTOR_STEPS: usize = 1_000_000;

pub(crate) fn env_or(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

/// Seeds without `SAFETY_SEEDS`: fewer in a debug build, where an operation
/// costs many times its release cost.
const DEFAULT_SEEDS: u64 = if cfg!(debug_assertions) { 100 } else { 200 };

/// The seeds and operations per seed this run covers.
fn settings() -> (Vec<u64>, usize) {
    let ops = env_or("SAFETY_OPS", 150) as usize;
    let seeds = match std::env::var("SAFETY_SEED") {
        Ok(_) => vec![env_or("SAFETY_SEED", 0)],
        Err(_) => (0..env_or("SAFETY_SEEDS", DEFAULT_SEEDS)).collect(),
    };
    (seeds, ops)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    FixedLatency,
    RandomLatency,
    DropApplied,
    DropNotApplied,
    Refuse,
    Hang,
    Partition,
    CrashRestart,
}

const KINDS: [Kind; 8] = [
    Kind::FixedLatency,
    Kind::RandomLatency,
    Kind::DropApplied,
    Kind::DropNotApplied,
    Kind::Refuse,
    Kind::Hang,
    Kind::Partition,
    Kind::CrashRestart,
];

/// Which faults the injector draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mix {
    /// Every kind, on random node sets, for random bounded durations.
    All,
    /// Only instant restarts of a majority, to show that the checks catch
    /// what quarantine prevents.
    MajorityRestarts,
    /// Three lockers; one at a time restarts while waiters hold partial
    /// grants, clients are cut off from single lockers, and requests are
    /// lost around the restarts: the edge where a restarted locker's
    /// forgotten grants meet a holder's refresh (which the `All` mix never
    /// reached when that edge was broken).
    Restarts,
}

impl Mix {
    pub(crate) fn nodes(self) -> usize {
        match self {
            Mix::Restarts => 3,
            Mix::All | Mix::MajorityRestarts => NODES,
        }
    }
}

/// One injected fault and when it ends.
#[derive(Debug)]
pub(crate) struct Fault {
    pub(crate) kind: Kind,
    nodes: Vec<usize>,
    owner: String,
    pub(crate) until: Instant,
}

pub(crate) fn ms(range: std::ops::Range<u64>, rng: &mut SmallRng) -> Duration {
    Duration::from_millis(rng.random_range(range))
}

impl Fault {
    /// A random fault. `holders` are the owners of the locks held now,
    /// oldest first.
    pub(crate) fn draw(mix: Mix, holders: &[String], rng: &mut SmallRng) -> Fault {
        let mut nodes: Vec<usize> = (0..mix.nodes()).collect();
        nodes.shuffle(rng);
        let mut owner = format!("client-{}", rng.random_range(0..CLIENTS));
        let (kind, size, lasts) = match mix {
            Mix::MajorityRestarts => (Kind::CrashRestart, NODES / 2 + 1, Duration::ZERO),
            // One locker at a time: never a majority down.
            // Partitions favour holders: a holder cut off from one locker
            // while it refreshes another that restarted is the edge.
            Mix::Restarts => match rng.random_range(0..10) {
                0 => (Kind::CrashRestart, 1, Duration::ZERO),
                1..=6 => {
                    if !holders.is_empty() && rng.random_bool(0.5) {
                        owner = holders[rng.random_range(0..holders.len())].clone();
                    }
                    (Kind::Partition, 1, ms(1_000..90_000, rng))
                }
                7..=8 => (Kind::DropNotApplied, 1, ms(200..3_000, rng)),
                _ => (Kind::DropApplied, 1, ms(200..3_000, rng)),
            },
            // Cut the oldest holder off from a majority for longer than the
            // trust window: the race between its loss and the next grant.
            Mix::All if !holders.is_empty() && rng.random_bool(0.1) => {
                owner = holders[0].clone();
                let size = rng.random_range(NODES / 2 + 1..=NODES);
                (Kind::Partition, size, ms(40_000..90_000, rng))
            }
            Mix::All => {
                let size = match rng.random_range(0..20) {
                    0..=9 => 1,
                    10..=15 => 2,
                    16..=18 => 3,
                    _ => rng.random_range(4..=NODES),
                };
                let kind = KINDS[rng.random_range(0..KINDS.len())];
                // Silences sometimes outlast the trust window. Refusals stay
                // short: every round that fails on a refusing node retries
                // its release there until it answers.
                let long = matches!(kind, Kind::Hang | Kind::Partition | Kind::CrashRestart)
                    && rng.random_bool(0.3);
                let lasts = match kind {
                    _ if long => ms(30_000..90_000, rng),
                    Kind::Refuse => ms(500..5_000, rng),
                    Kind::FixedLatency | Kind::RandomLatency => ms(1_000..30_000, rng),
                    // A crash of no duration is a plain restart.
                    Kind::CrashRestart if rng.random_bool(0.25) => Duration::ZERO,
                    _ => ms(500..20_000, rng),
                };
                (kind, size, lasts)
            }
        };
        nodes.truncate(size);
        Fault {
            kind,
            nodes,
            owner,
            until: Instant::now() + lasts,
        }
    }

    pub(crate) fn apply(&self, cluster: &TestCluster, rng: &mut SmallRng) {
        let nodes = &self.nodes;
        match self.kind {
            Kind::FixedLatency => cluster.set_latency(Latency::Fixed(ms(1..800, rng)), nodes),
            Kind::RandomLatency => {
                let max = ms(10..1_500, rng);
                cluster.set_latency(
                    Latency::Uniform {
                        min: Duration::ZERO,
                        max,
                    },
                    nodes,
                )
            }
            Kind::DropApplied => cluster.drop_replies(rng.random_range(0.1..1.0), true, nodes),
            Kind::DropNotApplied => cluster.drop_replies(rng.random_range(0.1..1.0), false, nodes),
            Kind::Refuse => cluster.set_refuse(true, nodes),
            Kind::Hang => cluster.set_hang(true, nodes),
            Kind::Partition => cluster.partition(&self.owner, nodes),
            Kind::CrashRestart => cluster.crash(nodes),
        }
        .expect("valid node indices");
    }

    pub(crate) fn undo(&self, cluster: &TestCluster) {
        let nodes = &self.nodes;
        match self.kind {
            Kind::FixedLatency | Kind::RandomLatency => cluster.set_latency(Latency::None, nodes),
            Kind::DropApplied | Kind::DropNotApplied => cluster.drop_replies(0.0, true, nodes),
            Kind::Refuse => cluster.set_refuse(false, nodes),
            Kind::Hang => cluster.set_hang(false, nodes),
            Kind::Partition => cluster.heal_partition(&self.owner, nodes),
            // Restarting wipes the table and starts the quarantine.
            Kind::CrashRestart => cluster.restart(nodes),
        }
        .expect("valid node indices");
    }
}

/// What one seed did and what went wrong in it.
#[derive(Debug, Default)]
pub(crate) struct Report {
    ops: usize,
    acquired: usize,
    writes: usize,
    multi: usize,
    timeouts: usize,
    lost: usize,
    /// Guards dropped, or unlocks cancelled, instead of waited for.
    dropped: usize,
    /// Holds meant to outlast the validity, and how many of them did.
    long_holds: usize,
    long_kept: usize,
    faults: BTreeMap<Kind, usize>,
    majority_faults: usize,
    /// A `History::check` violation, displayed.
    pub(crate) violation: Option<String>,
    /// Holds that drew a fencing token, and that could not.
    fenced: usize,
    fence_failed: usize,
    /// A `History::check_fencing` violation, displayed.
    fencing: Option<String>,
    /// Broken loss signalling, silent losses, unexpected errors, leaks.
    problems: Vec<String>,
    /// Virtual time the seed ran for, and locker calls it made.
    virtual_time: Duration,
    calls: u64,
    /// The history with uids replaced by their order of appearance.
    shape: Vec<(Duration, usize, u8)>,
}

impl Report {
    fn add(&mut self, other: &Report) {
        self.ops += other.ops;
        self.acquired += other.acquired;
        self.writes += other.writes;
        self.multi += other.multi;
        self.timeouts += other.timeouts;
        self.lost += other.lost;
        self.dropped += other.dropped;
        self.long_holds += other.long_holds;
        self.long_kept += other.long_kept;
        self.majority_faults += other.majority_faults;
        self.fenced += other.fenced;
        self.fence_failed += other.fence_failed;
        self.virtual_time += other.virtual_time;
        self.calls += other.calls;
        for (kind, count) in &other.faults {
            *self.faults.entry(*kind).or_default() += count;
        }
    }
}

/// Takes one op from the shared budget; `false` when none is left.
fn take_op(budget: &AtomicUsize) -> bool {
    budget
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
}

/// One client: locks random resources in random modes, holds them for a
/// random time racing the loss signal, and unlocks.
async fn worker(
    id: usize,
    cluster: Arc<TestCluster>,
    tracker: Arc<Tracker>,
    budget: Arc<AtomicUsize>,
    report: Arc<Mutex<Report>>,
    seed: u64,
    mix: Mix,
) {
    let owner = format!("client-{id}");
    let ds = client(
        &cluster,
        &owner,
        seed.wrapping_mul(31).wrapping_add(id as u64),
    );
    let mut rng = SmallRng::seed_from_u64(seed ^ (0x9e37_79b9 * (id as u64 + 1)));
    let validity = lease().validity;
    while take_op(&budget) {
        let mut names: Vec<&str> = RESOURCES.to_vec();
        names.shuffle(&mut rng);
        let count = if rng.random_bool(0.3) {
            rng.random_range(2..=3)
        } else {
            1
        };
        names.truncate(count);
        let mode = if rng.random_bool(0.5) {
            LockMode::Write
        } else {
            LockMode::Read
        };
        // Restarts meet waiters only when waits and holds span validities.
        let patience = match mix {
            Mix::Restarts if rng.random_bool(0.5) => ms(20_000..120_000, &mut rng),
            _ => ms(300..8_000, &mut rng),
        };
        let work = match (mix, rng.random_range(0..100)) {
            (Mix::Restarts, 0..=39) => ms(0..2_000, &mut rng),
            (Mix::Restarts, _) => ms(40_000..100_000, &mut rng),
            (_, 0..=79) => ms(0..2_000, &mut rng),
            (_, 80..=94) => ms(2_000..20_000, &mut rng),
            _ => ms(40_000..100_000, &mut rng),
        };
        let mutex = ds.rw_mutex(names).expect("valid names");
        let held = match Held::acquire(&mutex, mode, patience).await {
            Ok(held) => held,
            Err(e) => {
                {
                    let mut r = report.lock().unwrap();
                    r.ops += 1;
                    match e {
                        // A wait that gave up says why; under faults, any of these.
                        Error::Timeout
                        | Error::QuorumUnavailable { .. }
                        | Error::Quarantined { .. } => r.timeouts += 1,
                        e => r.problems.push(format!("{owner}: acquire failed with {e}")),
                    }
                }
                sleep(ms(0..3_000, &mut rng)).await;
                continue;
            }
        };
        let uid = held.uid().to_owned();
        let let_go = match rng.random_range(0..20) {
            0 => LetGo::Drop,
            1 => LetGo::CancelUnlock(ms(0..100, &mut rng)),
            _ => LetGo::Unlock,
        };
        let fence = rng.random_bool(0.5);
        let outcome = hold_fenced_then(&tracker, &owner, held, work, let_go, fence).await;
        if let_go != LetGo::Unlock {
            // A stall of this runtime's thread, in real time, right after
            // what a drop leaves for the background: nothing of the
            // library may run meanwhile. Work that runs beside the paused
            // runtime anyway (on another runtime, on the real clock) gets
            // its chance to act at a moment of its own, and the run shows
            // it; without such work the stall changes nothing, and the
            // seed replays alike.
            std::thread::sleep(Duration::from_millis(1));
        }
        {
            let mut r = report.lock().unwrap();
            r.ops += 1;
            r.acquired += 1;
            r.writes += usize::from(mode == LockMode::Write);
            r.multi += usize::from(count > 1);
            r.lost += usize::from(outcome.signalled);
            r.dropped += usize::from(let_go != LetGo::Unlock);
            if work > validity {
                r.long_holds += 1;
                r.long_kept += usize::from(!outcome.signalled);
            }
            match &outcome.fenced {
                Some(Ok(_)) => r.fenced += 1,
                // Under faults a token may be out of reach, or the lock lost.
                Some(Err(
                    Error::LockLost | Error::QuorumUnavailable { .. } | Error::Quarantined { .. },
                )) => r.fence_failed += 1,
                Some(Err(e)) => r
                    .problems
                    .push(format!("{owner}, lock {uid}: fencing_token: {e}")),
                None => {}
            }
            if let Some(breach) = outcome.contract_breach() {
                r.problems.push(format!("{owner}, lock {uid}: {breach}"));
            }
        }
        sleep(ms(0..3_000, &mut rng)).await;
    }
}

/// Injects faults until `done`, at most three at a time, each for a
/// bounded time, then heals all; returns how many. Partitions cut off one
/// of `holders()` when there is one. The election and semaphore tests
/// share it.
pub(crate) async fn inject_until_done(
    cluster: Arc<TestCluster>,
    holders: impl Fn() -> Vec<String>,
    mix: Mix,
    done: Arc<AtomicBool>,
    mut rng: SmallRng,
) -> usize {
    let mut active: Vec<Fault> = Vec::new();
    let mut injected = 0;
    for _ in 0..MAX_INJECTOR_STEPS {
        if done.load(Ordering::Relaxed) {
            break;
        }
        sleep(ms(500..10_000, &mut rng)).await;
        let now = Instant::now();
        active.retain(|f| {
            let over = f.until <= now;
            if over {
                f.undo(&cluster);
            }
            !over
        });
        if active.len() < 3 && rng.random_bool(0.5) {
            let fault = Fault::draw(mix, &holders(), &mut rng);
            fault.apply(&cluster, &mut rng);
            injected += 1;
            if fault.until <= now {
                fault.undo(&cluster);
            } else {
                active.push(fault);
            }
        }
    }
    for fault in active {
        fault.undo(&cluster);
    }
    cluster.heal_all();
    injected
}

/// Injects faults until `done`, each for a bounded time, then heals all.
async fn inject(
    cluster: Arc<TestCluster>,
    tracker: Arc<Tracker>,
    mix: Mix,
    done: Arc<AtomicBool>,
    report: Arc<Mutex<Report>>,
    seed: u64,
) {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xfa17);
    let mut active: Vec<Fault> = Vec::new();
    for _ in 0..MAX_INJECTOR_STEPS {
        if done.load(Ordering::Relaxed) {
            break;
        }
        sleep(match mix {
            Mix::All | Mix::Restarts => ms(500..10_000, &mut rng),
            Mix::MajorityRestarts => ms(1_000..15_000, &mut rng),
        })
        .await;
        let now = Instant::now();
        active.retain(|f| {
            let over = f.until <= now;
            if over {
                f.undo(&cluster);
            }
            !over
        });
        let most = if mix == Mix::Restarts { 4 } else { 3 };
        if active.len() < most && rng.random_bool(0.5) {
            let fault = Fault::draw(mix, &tracker.holders(), &mut rng);
            fault.apply(&cluster, &mut rng);
            if fault.until <= now {
                fault.undo(&cluster);
            }
            let mut r = report.lock().unwrap();
            *r.faults.entry(fault.kind).or_default() += 1;
            r.majority_faults += usize::from(fault.nodes.len() > mix.nodes() / 2);
            drop(r);
            if fault.until > now {
                active.push(fault);
            }
        }
    }
    for fault in active {
        fault.undo(&cluster);
    }
    cluster.heal_all();
}

/// Compares what holders believe with the lock tables, at random times.
async fn watch(
    cluster: Arc<TestCluster>,
    tracker: Arc<Tracker>,
    done: Arc<AtomicBool>,
    report: Arc<Mutex<Report>>,
    seed: u64,
) {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x0b5e);
    while !done.load(Ordering::Relaxed) {
        sleep(ms(500..3_000, &mut rng)).await;
        let silent = tracker.silent_losses(&cluster);
        if !silent.is_empty() {
            report.lock().unwrap().problems.extend(silent);
            return;
        }
    }
}

/// The history with uids replaced by the order in which they first appear,
/// which is the same on every run of a seed.
fn shape(tracker: &Tracker) -> Vec<(Duration, usize, u8)> {
    let events = tracker.history.events();
    let Some(t0) = events.first().map(|e| e.at) else {
        return Vec::new();
    };
    let mut ids: HashMap<String, usize> = HashMap::new();
    events
        .iter()
        .map(|e| {
            let next = ids.len();
            let id = *ids.entry(e.holder.clone()).or_insert(next);
            let kind = match e.kind {
                EventKind::Acquired {
                    mode: LockMode::Write,
                    ..
                } => 0,
                EventKind::Acquired {
                    mode: LockMode::Read,
                    ..
                } => 1,
                EventKind::LostSignalled => 2,
                EventKind::Released => 3,
                EventKind::Fenced { .. } => 4,
            };
            (e.at - t0, id, kind)
        })
        .collect()
}

/// Runs one seed on its own paused current-thread runtime, so that it
/// replays exactly however it is reached.
pub(crate) fn run_seed(seed: u64, ops: usize, config: LockerConfig, mix: Mix) -> Report {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let cluster = Arc::new(TestCluster::with_config(mix.nodes(), seed, config));
        let started = Instant::now();
        let tracker = Arc::new(Tracker::default());
        let report = Arc::new(Mutex::new(Report::default()));
        let done = Arc::new(AtomicBool::new(false));
        let budget = Arc::new(AtomicUsize::new(ops));
        let workers: Vec<_> = (0..CLIENTS)
            .map(|id| {
                let (c, t, b, r) = (
                    cluster.clone(),
                    tracker.clone(),
                    budget.clone(),
                    report.clone(),
                );
                tokio::spawn(worker(id, c, t, b, r, seed, mix))
            })
            .collect();
        let injector = tokio::spawn(inject(
            cluster.clone(),
            tracker.clone(),
            mix,
            done.clone(),
            report.clone(),
            seed,
        ));
        let watcher = tokio::spawn(watch(
            cluster.clone(),
            tracker.clone(),
            done.clone(),
            report.clone(),
            seed,
        ));
        for w in workers {
            w.await.expect("worker panicked");
        }
        done.store(true, Ordering::Relaxed);
        injector.await.expect("injector panicked");
        watcher.await.expect("watcher panicked");

        // Released locks are no longer refreshed anywhere, so every entry
        // is gone one validity after the last release.
        sleep(config.validity + Duration::from_secs(1)).await;
        let left = cluster.total_entries();
        let mut report = Arc::try_unwrap(report)
            .expect("every task is done")
            .into_inner()
            .unwrap();
        if left > 0 {
            report.problems.push(format!(
                "{left} entries still on the lockers a validity after every release"
            ));
        }
        report.violation = tracker.history.check().err().map(|v| v.to_string());
        report.fencing = tracker.history.check_fencing().err().map(|v| v.to_string());
        report.virtual_time = started.elapsed();
        report.calls = CallKind::ALL.iter().map(|&k| cluster.stats(k).seen).sum();
        report.shape = shape(&tracker);
        report
    })
}

impl Report {
    fn summary(&self) -> String {
        let kinds: Vec<String> = self
            .faults
            .iter()
            .map(|(k, n)| format!("{k:?} {n}"))
            .collect();
        format!(
            "{} ops: {} granted ({} writes, {} multi-resource, {} not waited for), {} timed out; \
             {} losses signalled; {} fencing tokens drawn, {} out of reach; {} of {} holds longer \
             than the validity kept; faults: {} ({} on a majority); {:?} virtual, {} locker calls",
            self.ops,
            self.acquired,
            self.writes,
            self.multi,
            self.dropped,
            self.timeouts,
            self.lost,
            self.fenced,
            self.fence_failed,
            self.long_kept,
            self.long_holds,
            kinds.join(", "),
            self.majority_faults,
            self.virtual_time,
            self.calls
        )
    }
}

/// Runs every seed on its own runtime, spread over the available cores, and
/// returns the reports in seed order. A seed that panics is reported as a
/// problem of that seed.
fn run_all(seeds: &[u64], ops: usize, config: LockerConfig, mix: Mix) -> Vec<(u64, Report)> {
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut reports: Vec<(u64, Report)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads.min(seeds.len()))
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    while let Some(&seed) = seeds.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let run = std::panic::catch_unwind(|| run_seed(seed, ops, config, mix));
                        out.push((seed, run.unwrap_or_else(|_| Report::panicked())));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("seed runner"))
            .collect()
    });
    reports.sort_by_key(|(seed, _)| *seed);
    reports
}

impl Report {
    fn panicked() -> Report {
        Report {
            problems: vec!["panicked (see the panic message above)".into()],
            ..Report::default()
        }
    }
}

fn replay(seed: u64, ops: usize, mix: Mix) -> String {
    let test = match mix {
        Mix::Restarts => "restarts_of_single_lockers_never_let_a_waiter_win_with_a_forgotten_grant",
        Mix::All | Mix::MajorityRestarts => {
            "randomized_faults_never_break_exclusion_or_hide_a_loss"
        }
    };
    format!(
        "replay: SAFETY_SEED={seed} SAFETY_OPS={ops} cargo test --all-features --test safety safety_randomized::{test}"
    )
}

/// Panics with the seed and its replay command on the first seed that
/// broke exclusion or fencing, hid a loss, or did not run every op; returns
/// the sum of the reports.
fn check_reports(reports: &[(u64, Report)], ops: usize, mix: Mix) -> Report {
    let mut total = Report::default();
    for (seed, report) in reports {
        let replay = replay(*seed, ops, mix);
        if let Some(v) = &report.violation {
            panic!("seed {seed}: mutual exclusion violated: {v}\n{replay}");
        }
        if let Some(v) = &report.fencing {
            panic!("seed {seed}: {v}\n{replay}");
        }
        assert!(
            report.problems.is_empty(),
            "seed {seed}: {}\n{replay}",
            report.problems.join("\n"),
        );
        assert_eq!(report.ops, ops, "seed {seed}: not every op ran\n{replay}");
        total.add(report);
    }
    total
}

#[test]
fn randomized_faults_never_break_exclusion_or_hide_a_loss() {
    let (seeds, ops) = settings();
    let started = std::time::Instant::now();
    let reports = run_all(&seeds, ops, LockerConfig::default(), Mix::All);
    let total = check_reports(&reports, ops, Mix::All);
    println!(
        "{} seeds x {ops} ops in {:?}: {}",
        seeds.len(),
        started.elapsed(),
        total.summary()
    );
    // The run exercised what it claims to: both modes, multi-resource
    // locks, every fault kind, losses, and long holds kept by refreshing.
    if seeds.len() >= 20 {
        let ctx = format!("{} seeds: {}", seeds.len(), total.summary());
        assert!(total.writes > 0 && total.writes < total.acquired, "{ctx}");
        assert!(
            total.multi > 0 && total.dropped > 0 && total.timeouts > 0,
            "{ctx}"
        );
        assert!(total.lost > 0 && total.long_kept > 0, "{ctx}");
        assert!(total.majority_faults > 0, "{ctx}");
        assert!(total.fenced > 0 && total.fence_failed > 0, "{ctx}");
        for kind in KINDS {
            assert!(
                total.faults.get(&kind) > Some(&0),
                "{kind:?} never injected: {ctx}"
            );
        }
    }
}

#[test]
fn a_seed_replays_the_same_run() {
    let run = |seed| run_seed(seed, 200, LockerConfig::default(), Mix::All);
    let (a, b) = (run(7), run(7));
    assert!(a.shape.len() > 100, "seed 7: only {} events", a.shape.len());
    assert_eq!(a.shape, b.shape, "seed 7 does not replay");
    assert_eq!(
        (a.faults, a.calls),
        (b.faults, b.calls),
        "seed 7 does not replay"
    );
    assert_ne!(a.shape, run(8).shape, "seeds 7 and 8 ran the same");
}

/// The same workload without restart quarantine, and with majority
/// restarts: lockers forget held locks and grant them again. Both checks
/// must notice, or the randomized test above could pass without checking
/// anything.
#[test]
fn the_checks_catch_majority_restarts_without_quarantine() {
    let unsafe_config = LockerConfig {
        quarantine: Duration::ZERO,
        ..LockerConfig::default()
    };
    let seeds: Vec<u64> = (0..10).collect();
    let reports = run_all(&seeds, 300, unsafe_config, Mix::MajorityRestarts);
    let violations = reports
        .iter()
        .filter(|(_, r)| r.violation.is_some())
        .count();
    let silent = reports
        .iter()
        .filter(|(_, r)| r.problems.iter().any(|p| p.contains("believes it holds")))
        .count();
    println!(
        "without quarantine: {violations} violations, {silent} silent losses in seeds {seeds:?}"
    );
    assert!(
        violations >= 8,
        "the checker found only {violations} violations in seeds {seeds:?}"
    );
    assert!(
        silent >= 8,
        "the watcher found only {silent} silent losses in seeds {seeds:?}"
    );
}

/// Restarts of one locker in three at a time, while waiters hold partial
/// grants and clients are cut off from single lockers.
/// Before the fix (a quarantined locker's refresh re-created the holder's
/// entry and counted; a waiter kept a grant its restarted locker had
/// forgotten), this mix broke exclusion in 6 of seeds 0..100, the first
/// at seed 24 (see RELIABILITY.md). Seeds 0..100 by default (0..50 in a
/// debug build, about 12 s on two cores); `SAFETY_SEEDS` and `SAFETY_SEED`
/// as above.
#[test]
fn restarts_of_single_lockers_never_let_a_waiter_win_with_a_forgotten_grant() {
    let (mut seeds, ops) = settings();
    if std::env::var_os("SAFETY_SEEDS").is_none() && std::env::var_os("SAFETY_SEED").is_none() {
        seeds.truncate(if cfg!(debug_assertions) { 50 } else { 100 });
    }
    let started = std::time::Instant::now();
    let reports = run_all(&seeds, ops, LockerConfig::default(), Mix::Restarts);
    let total = check_reports(&reports, ops, Mix::Restarts);
    println!(
        "restarts mix: {} seeds x {ops} ops in {:?}: {}",
        seeds.len(),
        started.elapsed(),
        total.summary()
    );
    if seeds.len() >= 20 {
        let ctx = format!("{} seeds: {}", seeds.len(), total.summary());
        assert!(total.faults.get(&Kind::CrashRestart) > Some(&0), "{ctx}");
        assert!(total.faults.get(&Kind::Partition) > Some(&0), "{ctx}");
        assert!(total.acquired > 0 && total.timeouts > 0, "{ctx}");
    }
}
