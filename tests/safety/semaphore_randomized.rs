#![cfg(feature = "testing")]
//! Randomized semaphore safety: clients take permits of one semaphore,
//! hold them for a while, release or drop them, or lose them, while the
//! fault injector of the lock test slows, drops, refuses, hangs,
//! partitions, crashes and restarts lockers. One client opens the
//! semaphore with another number of permits. For every seed:
//! * at no instant do more holders believe they hold a permit
//!   (`is_lost()` false) than the semaphore's permits;
//! * holders that opened it with different numbers of permits never
//!   believe they hold at once;
//! * no slot has two holders at once, and the fencing tokens of a slot
//!   strictly grow from holder to holder;
//! * without faults, waiters are granted in the order they came.
//!
//! `SEMAPHORE_SEEDS` (default 30, 12 in a debug build) seeds of
//! `SEMAPHORE_OPS` (default 40) acquires; `SEMAPHORE_SEED=n` runs seed `n`
//! alone.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::harness::{client, instant_of};
use crate::safety_randomized::{env_or, inject_until_done, ms, Mix};
use quorum_lock::testing::{EventKind, History, TestCluster};
use quorum_lock::{Error, LockMode, LockerConfig};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::{sleep, Instant};

const NAME: &str = "jobs";
/// The permits every client but one opens the semaphore with.
const PERMITS: usize = 2;
/// The client that opens it with [`ROGUE_PERMITS`]; within the injector's
/// range of clients, so that partitions cut it off too.
const ROGUE: usize = 3;
const ROGUE_PERMITS: usize = 3;
const CLIENTS: usize = 6;

const DEFAULT_SEEDS: u64 = if cfg!(debug_assertions) { 12 } else { 30 };

fn settings() -> (Vec<u64>, usize) {
    let ops = env_or("SEMAPHORE_OPS", 40) as usize;
    let seeds = match std::env::var("SEMAPHORE_SEED") {
        Ok(_) => vec![env_or("SEMAPHORE_SEED", 0)],
        Err(_) => (0..env_or("SEMAPHORE_SEEDS", DEFAULT_SEEDS)).collect(),
    };
    (seeds, ops)
}

/// One holder's belief: from its grant to its release or loss signal.
#[derive(Debug, Clone)]
struct Hold {
    owner: String,
    slot: usize,
    permits: usize,
    from: Instant,
    until: Option<Instant>,
}

#[derive(Default)]
struct Shared {
    /// Every permit as a write hold of its slot, with the slot's fencing
    /// tokens: `History::check` finds two holders of a slot at once,
    /// `check_fencing` a token that did not grow.
    history: History,
    holds: Mutex<Vec<Hold>>,
    /// Owners holding now, for the injector to cut off.
    holding: Mutex<Vec<String>>,
    problems: Mutex<Vec<String>>,
    granted: AtomicUsize,
    lost: AtomicUsize,
    mismatches: AtomicUsize,
}

impl Shared {
    fn problem(&self, what: String) {
        self.problems.lock().unwrap().push(what);
    }
}

fn take_op(budget: &AtomicUsize) -> bool {
    budget
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
}

async fn holder(
    id: usize,
    cluster: Arc<TestCluster>,
    shared: Arc<Shared>,
    budget: Arc<AtomicUsize>,
    seed: u64,
) {
    let owner = format!("client-{id}");
    let ds = client(
        &cluster,
        &owner,
        seed.wrapping_mul(97).wrapping_add(id as u64),
    );
    let permits = if id == ROGUE { ROGUE_PERMITS } else { PERMITS };
    let sem = ds.semaphore(NAME, permits).expect("valid semaphore");
    // Clients 0 and 1 run two loops on one handle, whose permits share the
    // count's read lock while both hold.
    let loops = if id < 2 { 2 } else { 1 };
    let runs = (0..loops).map(|lane| {
        let rng = SmallRng::seed_from_u64(seed ^ (0x5e3a_u64 * (id as u64 + 1)) ^ lane);
        holder_loop(
            owner.clone(),
            permits,
            sem.clone(),
            shared.clone(),
            budget.clone(),
            rng,
        )
    });
    futures::future::join_all(runs).await;
}

async fn holder_loop(
    owner: String,
    permits: usize,
    sem: quorum_lock::Semaphore,
    shared: Arc<Shared>,
    budget: Arc<AtomicUsize>,
    mut rng: SmallRng,
) {
    while take_op(&budget) {
        let patience = ms(1_000..60_000, &mut rng);
        let permit = match sem.acquire_timeout(patience).await {
            Ok(permit) => permit,
            Err(Error::Timeout | Error::QuorumUnavailable { .. } | Error::Quarantined { .. }) => {
                sleep(ms(0..3_000, &mut rng)).await;
                continue;
            }
            Err(Error::PermitsMismatch { in_use, .. }) => {
                shared.mismatches.fetch_add(1, Ordering::Relaxed);
                if in_use == Some(permits) {
                    shared.problem(format!("{owner}: refused for a count equal to its own"));
                }
                sleep(ms(1_000..20_000, &mut rng)).await;
                continue;
            }
            Err(err) => {
                shared.problem(format!("{owner}: acquire failed with {err}"));
                continue;
            }
        };
        let now = Instant::now();
        if permit.is_lost() {
            shared.problem(format!("{owner}: acquire returned a lost permit"));
        }
        let uid = permit.uid().to_owned();
        let slot = permit.slots()[0];
        if slot >= permits {
            shared.problem(format!("{owner}: slot {slot} of {permits} permits"));
        }
        let resource = format!("semaphore/{NAME}/permit/{slot}");
        shared
            .history
            .acquired(&uid, [resource.as_str()], LockMode::Write);
        let at = shared.holds.lock().unwrap().len();
        shared.holds.lock().unwrap().push(Hold {
            owner: owner.clone(),
            slot,
            permits,
            from: now,
            until: None,
        });
        shared.holding.lock().unwrap().push(owner.clone());
        shared.granted.fetch_add(1, Ordering::Relaxed);
        let lost_at = instant_of(permit.lost());
        if rng.random_bool(0.6) {
            match permit.fencing_token().await {
                Ok(token) => shared.history.fenced(&uid, token),
                Err(Error::LockLost | Error::QuorumUnavailable { .. }) => {}
                Err(err) => shared.problem(format!("{owner}: fencing token failed with {err}")),
            }
        }
        let pause = match rng.random_range(0..10) {
            0 => ms(30_000..90_000, &mut rng),
            _ => ms(0..8_000, &mut rng),
        };
        sleep(pause).await;
        let end = if permit.is_lost() {
            let at = lost_at.await.expect("the loss signal task");
            shared.history.record_at(at, &uid, EventKind::LostSignalled);
            shared.lost.fetch_add(1, Ordering::Relaxed);
            drop(permit);
            at
        } else {
            lost_at.abort();
            // Recorded before the lockers can free it.
            shared.history.released(&uid);
            let end = Instant::now();
            if rng.random_bool(0.7) {
                match permit.unlock().await {
                    Ok(()) | Err(Error::ReleaseUnconfirmed { .. } | Error::LockLost) => {}
                    Err(err) => shared.problem(format!("{owner}: unlock failed with {err}")),
                }
            } else {
                drop(permit);
            }
            end
        };
        shared.holds.lock().unwrap()[at].until = Some(end);
        {
            let mut holding = shared.holding.lock().unwrap();
            if let Some(i) = holding.iter().position(|o| o == &owner) {
                holding.remove(i);
            }
        }
        sleep(ms(0..3_000, &mut rng)).await;
    }
}

/// Every instant where more believed they held than their count allows,
/// or holders of different counts believed at once.
fn check_holds(holds: &[Hold], problems: &mut Vec<String>) {
    // A hold ends at its release or loss signal; one that ends at the
    // instant another begins does not overlap it.
    let mut points: Vec<(Instant, bool, usize)> = Vec::new();
    for (i, h) in holds.iter().enumerate() {
        // Released at the instant it was granted (a pause of 0 ms): it
        // overlaps nothing, and its end would sort before its beginning.
        if h.until.is_some_and(|until| until <= h.from) {
            continue;
        }
        points.push((h.from, true, i));
        if let Some(until) = h.until {
            points.push((until, false, i));
        }
    }
    // Ends before beginnings at the same instant.
    points.sort_by_key(|&(at, begins, i)| (at, begins, i));
    let mut now: Vec<usize> = Vec::new();
    for (at, begins, i) in points {
        if !begins {
            now.retain(|&j| j != i);
            continue;
        }
        now.push(i);
        let counts: Vec<usize> = now.iter().map(|&j| holds[j].permits).collect();
        let least = counts.iter().copied().min().unwrap_or(usize::MAX);
        if now.len() > least || counts.iter().any(|&c| c != counts[0]) {
            let who: Vec<String> = now
                .iter()
                .map(|&j| {
                    let h = &holds[j];
                    format!(
                        "{} (k={}, slot {}, from {:?} until {:?})",
                        h.owner, h.permits, h.slot, h.from, h.until
                    )
                })
                .collect();
            problems.push(format!("at {at:?}, {} held at once: {who:?}", now.len()));
        }
    }
}

#[derive(Debug, Default)]
struct Report {
    granted: usize,
    lost: usize,
    mismatches: usize,
    faults: usize,
    problems: Vec<String>,
}

fn run_seed(seed: u64, ops: usize, mix: Mix) -> Report {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let cluster = Arc::new(TestCluster::with_config(
            mix.nodes(),
            seed,
            LockerConfig::default(),
        ));
        let shared = Arc::new(Shared::default());
        let budget = Arc::new(AtomicUsize::new(ops));
        let done = Arc::new(AtomicBool::new(false));
        let holders: Vec<_> = (0..CLIENTS)
            .map(|id| {
                tokio::spawn(holder(
                    id,
                    cluster.clone(),
                    shared.clone(),
                    budget.clone(),
                    seed,
                ))
            })
            .collect();
        let injector = tokio::spawn(inject_until_done(
            cluster.clone(),
            {
                let shared = shared.clone();
                move || shared.holding.lock().unwrap().clone()
            },
            mix,
            done.clone(),
            SmallRng::seed_from_u64(seed ^ 0x5e3a_f00d),
        ));
        for h in holders {
            h.await.expect("holder panicked");
        }
        done.store(true, Ordering::Relaxed);
        let faults = injector.await.expect("injector panicked");
        let mut report = Report {
            faults,
            granted: shared.granted.load(Ordering::Relaxed),
            lost: shared.lost.load(Ordering::Relaxed),
            mismatches: shared.mismatches.load(Ordering::Relaxed),
            ..Report::default()
        };
        check_holds(&shared.holds.lock().unwrap(), &mut report.problems);
        if let Err(v) = shared.history.check() {
            report
                .problems
                .push(format!("two holders of a slot at once: {v}"));
        }
        if let Err(v) = shared.history.check_fencing() {
            report
                .problems
                .push(format!("a slot's tokens did not grow: {v}"));
        }
        report
            .problems
            .extend(shared.problems.lock().unwrap().drain(..));
        report
    })
}

fn run_mix(mix: Mix) {
    let (seeds, ops) = settings();
    let mut total = Report::default();
    let mut failed = Vec::new();
    for &seed in &seeds {
        let report = run_seed(seed, ops, mix);
        if !report.problems.is_empty() {
            failed.push(format!(
                "seed {seed} ({mix:?}; replay with SEMAPHORE_SEED={seed}): {:#?}",
                report.problems
            ));
        }
        total.granted += report.granted;
        total.lost += report.lost;
        total.mismatches += report.mismatches;
        total.faults += report.faults;
    }
    eprintln!(
        "semaphore {mix:?}: {} seeds, {} permits granted ({} lost), {} refused for another count, {} faults",
        seeds.len(),
        total.granted,
        total.lost,
        total.mismatches,
        total.faults
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    // The run must have exercised what it checks.
    assert!(
        total.granted >= seeds.len() * 5,
        "too few permits: {total:?}"
    );
    assert!(
        total.mismatches > 0,
        "the other count never met a holder: {total:?}"
    );
}

#[test]
fn semaphores_under_random_faults_never_admit_more_than_their_permits() {
    run_mix(Mix::All);
}

#[test]
fn semaphores_through_single_locker_restarts_never_admit_more_than_their_permits() {
    run_mix(Mix::Restarts);
}

/// Without faults the line is strict: a waiter that came earlier is
/// granted earlier. Six clients on a semaphore of two permits, each
/// arriving at its own instant and waiting as long as it takes.
#[test]
fn without_faults_waiters_are_granted_in_the_order_they_came() {
    let (seeds, _) = settings();
    for seed in seeds {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a runtime");
        let order = runtime.block_on(async move {
            let cluster = Arc::new(TestCluster::new(5, seed));
            let grants = Arc::new(Mutex::new(Vec::new()));
            let mut rng = SmallRng::seed_from_u64(seed ^ 0xf1f0);
            let mut tasks = Vec::new();
            for n in 0..24u64 {
                let ds = client(&cluster, &format!("client-{}", n % 6), seed ^ n);
                let hold = ms(1..3_000, &mut rng);
                let grants = grants.clone();
                tasks.push(tokio::spawn(async move {
                    let sem = ds.semaphore(NAME, PERMITS).expect("valid semaphore");
                    let permit = sem.acquire().await.expect("granted in turn");
                    grants.lock().unwrap().push(n);
                    sleep(hold).await;
                    drop(permit);
                }));
                // Distinct arrival instants, some while permits are free.
                sleep(ms(1..400, &mut rng)).await;
            }
            for t in tasks {
                t.await.expect("no panic");
            }
            let order = grants.lock().unwrap().clone();
            order
        });
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(
            order, sorted,
            "seed {seed} (SEMAPHORE_SEED={seed}): granted out of order"
        );
    }
}
