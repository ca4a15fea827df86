#![cfg(feature = "testing")]
//! A randomized search for stuck states of waiting in line.
//!
//! Each seed builds a cluster of 1 to 6 `LocalLocker`s behind
//! `testing::FaultyLocker`s (which forward `lock_wait` and carry the pushes
//! through the same faults) and 2 to 4 clients, each waiting in line or
//! polling, with one or two workers that take read and write locks with
//! `lock_timeout`/`read_timeout` on one or both of two names. For a while a
//! fault driver adds latency, loses replies and pushes, cuts clients off
//! from nodes, hangs, crashes and restarts nodes, and kills workers in the
//! middle of a wait or while holding (aborting their task). Then every
//! worker is killed, every fault is healed, and every client asks once
//! more: each must get its lock within [`bound`] of the healing, and once
//! they are done, after a place TTL more, no node may keep an entry or a
//! place. Mutual exclusion is checked all along with a `History`.
//!
//! A failure names its seed; `STUCK_SEED=<seed>` replays just that seed
//! (the runs are on paused time, so a seed replays the same schedule), and
//! `STUCK_SEEDS=<count>` changes how many seeds run.
//!
//! Seeds 165 and 370 (of the first 1000) found the bug fixed in 0d8aadb:
//! a waiter's re-sends did not renew a grant it already had, so it could
//! win with a grant that expired a moment later, and a writer got in.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::harness::Held;
use quorum_lock::testing::{History, Latency, TestCluster};
use quorum_lock::{Dsync, Error, Lease, LockMode, LockerConfig, RetryPolicy, Timeouts, Waiting};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::task::JoinHandle;
use tokio::time::{sleep, sleep_until, Instant};

const SEEDS: u64 = 300;
/// How long faults are injected.
const CHAOS: Duration = Duration::from_secs(20);
/// How long each client holds its lock after the healing.
const FINAL_HOLD: Duration = Duration::from_millis(100);
/// How many locks each client asks for at once after the healing.
const FINALS_PER_CLIENT: usize = 2;
/// The longest injected latency.
const MAX_LATENCY: Duration = Duration::from_millis(50);

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

fn locker_config() -> LockerConfig {
    LockerConfig {
        validity: Duration::from_secs(10),
        quarantine: Duration::from_secs(10),
    }
}

fn lease() -> Lease {
    Lease {
        validity: Duration::from_secs(10),
        refresh_interval: Duration::from_secs(2),
        safety_margin: Duration::from_secs(3),
    }
}

fn timeouts() -> Timeouts {
    Timeouts {
        wait_recheck: ms(500),
        ..Timeouts::default()
    }
}

fn retry() -> RetryPolicy {
    RetryPolicy::default()
}

/// How long after the healing every one of `asking` acquisitions that ask
/// at once must have its lock.
///
/// Whatever the faults left behind is gone by `recovery`: a node restarted
/// by the healing leaves its quarantine; an entry of a killed holder or
/// waiter, or one granted later to the place of a killed waiter (a place
/// lives one place TTL after its last request, which reached the node at
/// most one latency after the healing), expires one validity after it was
/// made. Then the clients go one at a time (readers may share): each hold
/// lasts `FINAL_HOLD`, and each hand-off takes at most a re-check, an
/// acquire deadline and a backoff (a client that polls, or a waiter whose
/// node refused it in quarantine, backs off up to `RetryPolicy::max`),
/// plus a few latencies for the release, the push and a step back.
fn bound(asking: usize) -> Duration {
    let t = timeouts();
    let place_ttl = t.wait_recheck * 3;
    let config = locker_config();
    let recovery = config
        .quarantine
        .max(config.validity + place_ttl + MAX_LATENCY);
    let hand_off = FINAL_HOLD + t.wait_recheck + t.acquire + retry().max + MAX_LATENCY * 4;
    recovery + hand_off * asking as u32
}

/// What one seed did, to check that the runs exercise what they should.
#[derive(Debug, Default, Clone)]
struct Summary {
    acquired: usize,
    timed_out: usize,
    killed: usize,
    max_places: usize,
    faults: usize,
}

struct Client {
    ds: Dsync,
    owner: String,
    waiting: Waiting,
}

struct Shared {
    history: History,
    acquired: AtomicUsize,
    timed_out: AtomicUsize,
    /// Errors other than a timeout: none is expected.
    unexpected: Mutex<Vec<String>>,
}

/// One of the two names, or both.
fn pick_names(rng: &mut SmallRng) -> Vec<&'static str> {
    match rng.random_range(0..3) {
        0 => vec!["x"],
        1 => vec!["y"],
        _ => vec!["x", "y"],
    }
}

fn pick_mode(rng: &mut SmallRng) -> LockMode {
    if rng.random_bool(0.5) {
        LockMode::Write
    } else {
        LockMode::Read
    }
}

/// A holder's belief that it holds its lock, in the history: from the
/// grant until it is told of a loss, starts releasing, or is killed.
struct Belief<'a> {
    shared: &'a Shared,
    uid: String,
    ended: bool,
}

impl<'a> Belief<'a> {
    fn begin(shared: &'a Shared, held: &Held, names: &[&str], mode: LockMode) -> Self {
        let uid = held.uid().to_owned();
        shared.history.acquired(&uid, names.iter().copied(), mode);
        Belief {
            shared,
            uid,
            ended: false,
        }
    }

    fn end(mut self, lost: bool) {
        self.ended = true;
        if lost {
            self.shared.history.lost_signalled(&self.uid);
        } else {
            self.shared.history.released(&self.uid);
        }
    }
}

impl Drop for Belief<'_> {
    fn drop(&mut self) {
        // The worker was killed while holding: it stops believing at once.
        if !self.ended {
            self.shared.history.released(&self.uid);
        }
    }
}

/// Takes locks until it is killed.
async fn worker(ds: Dsync, name: String, mut rng: SmallRng, shared: Arc<Shared>) {
    loop {
        let names = pick_names(&mut rng);
        let mode = pick_mode(&mut rng);
        // Now and then a wait longer than the validity, so that places and
        // partial grants must be kept alive by re-sends.
        let patience = if rng.random_bool(0.2) {
            ms(rng.random_range(10_000..25_000))
        } else {
            ms(rng.random_range(50..5_000))
        };
        let hold = ms(rng.random_range(0..1_500));
        let mutex = ds.rw_mutex(names.iter().copied()).unwrap();
        match Held::acquire(&mutex, mode, patience).await {
            Ok(held) => {
                shared.acquired.fetch_add(1, Ordering::Relaxed);
                let belief = Belief::begin(&shared, &held, &names, mode);
                tokio::select! {
                    _ = sleep(hold) => belief.end(false),
                    _ = held.lost() => belief.end(true),
                }
                if rng.random_bool(0.5) {
                    let _ = held.unlock().await;
                } else {
                    drop(held);
                }
            }
            // A wait that gave up says why; under faults, any of these.
            Err(Error::Timeout | Error::QuorumUnavailable { .. } | Error::Quarantined { .. }) => {
                shared.timed_out.fetch_add(1, Ordering::Relaxed);
            }
            Err(err) => shared
                .unexpected
                .lock()
                .unwrap()
                .push(format!("{name}: {names:?} {mode:?}: {err}")),
        }
        sleep(ms(rng.random_range(0..500))).await;
    }
}

/// One seed. `Err` describes what went wrong.
async fn run(seed: u64) -> Result<Summary, String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let n = rng.random_range(1..=6usize);
    let cluster = TestCluster::with_config(n, seed, locker_config());
    let clients: Vec<Client> = (0..rng.random_range(2..=4usize))
        .map(|c| {
            let waiting = if rng.random_bool(0.7) {
                Waiting::Push
            } else {
                Waiting::Poll
            };
            let owner = format!("client-{c}");
            let ds = Dsync::builder(cluster.net_lockers())
                .owner(owner.clone())
                .rng_seed(seed.wrapping_mul(31).wrapping_add(c as u64))
                .lease(lease())
                .timeouts(timeouts())
                .retry(retry())
                .waiting(waiting)
                .build()
                .map_err(|e| format!("client settings: {e}"))?;
            Ok(Client { ds, owner, waiting })
        })
        .collect::<Result<_, String>>()?;
    let shared = Arc::new(Shared {
        history: History::new(),
        acquired: AtomicUsize::new(0),
        timed_out: AtomicUsize::new(0),
        unexpected: Mutex::new(Vec::new()),
    });
    let mut summary = Summary::default();
    let setup = format!(
        "{n} nodes, clients {:?}",
        clients.iter().map(|c| c.waiting).collect::<Vec<_>>()
    );

    // Workers: (client, task). A killed worker is replaced by a new one.
    let mut spawned = 0u64;
    let mut spawn = |c: usize| -> JoinHandle<()> {
        spawned += 1;
        let worker_rng = SmallRng::seed_from_u64(seed ^ (spawned << 32));
        let name = format!("{}/worker-{spawned}", clients[c].owner);
        tokio::spawn(worker(
            clients[c].ds.clone(),
            name,
            worker_rng,
            shared.clone(),
        ))
    };
    let mut workers: Vec<(usize, JoinHandle<()>)> = Vec::new();
    for c in 0..clients.len() {
        for _ in 0..rng.random_range(1..=2) {
            workers.push((c, spawn(c)));
        }
    }

    // Faults.
    let start = Instant::now();
    while start.elapsed() < CHAOS {
        sleep(ms(rng.random_range(50..1_500))).await;
        summary.max_places = summary
            .max_places
            .max(cluster.lockers().iter().map(|l| l.waiting()).sum());
        summary.faults += 1;
        let node = rng.random_range(0..n);
        let nodes = [node];
        let owner = &clients[rng.random_range(0..clients.len())].owner;
        let result = match rng.random_range(0..10) {
            0 => {
                let max = ms(rng.random_range(0..=MAX_LATENCY.as_millis() as u64));
                cluster.set_latency(
                    Latency::Uniform {
                        min: Duration::ZERO,
                        max,
                    },
                    &nodes,
                )
            }
            1 => {
                let p = [0.1, 0.3, 0.6][rng.random_range(0..3)];
                cluster.drop_replies(p, rng.random_bool(0.5), &nodes)
            }
            2 => cluster.partition(owner, &nodes),
            3 => cluster.heal_partition(owner, &nodes),
            4 => cluster.crash(&nodes),
            5 => cluster.restart(&nodes),
            6 => cluster.set_hang(rng.random_bool(0.5), &nodes),
            7 => cluster.heal(&nodes),
            _ => {
                // A worker dies wherever it is: waiting, holding, releasing.
                let victim = rng.random_range(0..workers.len());
                let c = workers[victim].0;
                workers[victim].1.abort();
                workers[victim] = (c, spawn(c));
                summary.killed += 1;
                Ok(())
            }
        };
        result.map_err(|e| format!("fault driver: {e}"))?;
    }

    // Every worker dies, every fault heals.
    for (_, task) in &workers {
        task.abort();
    }
    for (_, task) in workers {
        let _ = task.await;
    }
    cluster.heal_all();
    // Jitter stays: it slows nobody down for long, and it lets the last
    // requests reach the nodes in different orders, which splits grants.
    let all: Vec<usize> = (0..n).collect();
    let jitter = Latency::Uniform {
        min: Duration::ZERO,
        max: MAX_LATENCY,
    };
    cluster
        .set_latency(jitter, &all)
        .map_err(|e| e.to_string())?;
    let healed = Instant::now();
    let limit = bound(FINALS_PER_CLIENT * clients.len());

    // Every client asks once more from each of its workers, all at once.
    let finals: Vec<JoinHandle<Result<Duration, String>>> = clients
        .iter()
        .flat_map(|client| std::iter::repeat_n(client, FINALS_PER_CLIENT))
        .map(|client| {
            let names = pick_names(&mut rng);
            let mode = pick_mode(&mut rng);
            let mutex = client.ds.rw_mutex(names.iter().copied()).unwrap();
            let (owner, shared) = (client.owner.clone(), shared.clone());
            tokio::spawn(async move {
                let what = format!("{owner} {mode:?} {names:?}");
                let held = Held::acquire(&mutex, mode, limit)
                    .await
                    .map_err(|e| format!("{what}: {e} after the healing"))?;
                let took = healed.elapsed();
                let uid = held.uid().to_owned();
                shared.history.acquired(&uid, names.iter().copied(), mode);
                sleep(FINAL_HOLD).await;
                shared.history.released(&uid);
                held.unlock()
                    .await
                    .map_err(|e| format!("{what}: unlock: {e}"))?;
                Ok(took)
            })
        })
        .collect();
    let mut failures = Vec::new();
    for task in finals {
        match task.await {
            Ok(Ok(took)) if took <= limit => {}
            Ok(Ok(took)) => failures.push(format!("got the lock {took:?} after the healing")),
            Ok(Err(e)) => failures.push(e),
            Err(e) => failures.push(format!("final task: {e}")),
        }
    }
    if !failures.is_empty() {
        return Err(format!(
            "{setup}: not every client got its lock within {limit:?} of the healing: {failures:?}"
        ));
    }

    // Nothing may be left once the leftovers of the dead could exist no
    // more, plus one place TTL.
    let place_ttl = timeouts().wait_recheck * 3;
    let config = locker_config();
    sleep_until(healed + config.validity + place_ttl + MAX_LATENCY).await;
    sleep(place_ttl).await;
    let mut left = BTreeMap::new();
    for (i, locker) in cluster.lockers().iter().enumerate() {
        let entries = locker.snapshot();
        let places = locker.waiting();
        if !entries.is_empty() || places > 0 {
            left.insert(i, (entries, places));
        }
    }
    if !left.is_empty() {
        return Err(format!(
            "{setup}: left behind (node: entries, places): {left:#?}"
        ));
    }

    if let Err(violation) = shared.history.check() {
        return Err(format!("{setup}: mutual exclusion violated: {violation}"));
    }
    let unexpected = shared.unexpected.lock().unwrap().clone();
    if !unexpected.is_empty() {
        return Err(format!("{setup}: unexpected errors: {unexpected:?}"));
    }
    summary.acquired = shared.acquired.load(Ordering::Relaxed);
    summary.timed_out = shared.timed_out.load(Ordering::Relaxed);
    Ok(summary)
}

/// Runs one seed on its own current-thread runtime with paused time.
fn run_seed(seed: u64) -> Result<Summary, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .map_err(|e| e.to_string())?;
    std::panic::catch_unwind(AssertUnwindSafe(|| runtime.block_on(run(seed)))).unwrap_or_else(
        |panic| {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panicked: {what}"))
        },
    )
}

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value} is not a number")),
    )
}

#[test]
fn no_client_is_stuck_after_faults_heal() {
    let seeds: Vec<u64> = match env_u64("STUCK_SEED") {
        Some(seed) => vec![seed],
        None => (0..env_u64("STUCK_SEEDS").unwrap_or(SEEDS)).collect(),
    };
    /// Real time one seed may take before it counts as stuck in a loop
    /// that never lets the paused clock move.
    const WATCHDOG: Duration = Duration::from_secs(120);
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8);
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    // Per thread: the seed it runs and since when (real time), or none.
    let running: Vec<Mutex<Option<(u64, std::time::Instant)>>> =
        (0..threads).map(|_| Mutex::new(None)).collect();
    let finished = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for slot in &running {
            let (next, results, seeds, finished) = (&next, &results, &seeds, &finished);
            scope.spawn(move || loop {
                let Some(&seed) = seeds.get(next.fetch_add(1, Ordering::SeqCst)) else {
                    return;
                };
                *slot.lock().unwrap() = Some((seed, std::time::Instant::now()));
                let result = run_seed(seed);
                *slot.lock().unwrap() = None;
                results.lock().unwrap().push((seed, result));
                finished.fetch_add(1, Ordering::SeqCst);
            });
        }
        while finished.load(Ordering::SeqCst) < seeds.len() as u64 {
            std::thread::sleep(Duration::from_millis(200));
            for slot in &running {
                if let Some((seed, since)) = *slot.lock().unwrap()
                    && since.elapsed() > WATCHDOG
                {
                    eprintln!(
                        "seed {seed} has run for {WATCHDOG:?} of real time: stuck in a loop \
                             that never idles; replay with STUCK_SEED={seed}"
                    );
                    std::process::exit(101);
                }
            }
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(seed, _)| *seed);
    let failures: Vec<String> = results
        .iter()
        .filter_map(|(seed, r)| {
            r.as_ref()
                .err()
                .map(|e| format!("seed {seed} (replay with STUCK_SEED={seed}): {e}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} seeds failed:\n{}",
        failures.len(),
        results.len(),
        failures.join("\n")
    );
    // The runs must have exercised what they are about.
    let total =
        results
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .fold(Summary::default(), |a, s| Summary {
                acquired: a.acquired + s.acquired,
                timed_out: a.timed_out + s.timed_out,
                killed: a.killed + s.killed,
                max_places: a.max_places.max(s.max_places),
                faults: a.faults + s.faults,
            });
    eprintln!("{} seeds: {total:?}", results.len());
    if seeds.len() > 1 {
        assert!(
            total.acquired > 0 && total.timed_out > 0 && total.killed > 0,
            "{total:?}"
        );
        assert!(
            total.max_places > 0,
            "nobody ever waited in line: {total:?}"
        );
    }
}
