//! Within the drift bound: clocks at rates within 0.92..1.09, changed
//! while clients hold locks, under the lock test's faults.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{client, paused_runtime, replay, run_seeds, settings, take_op, MAX_STEPS};
use crate::harness::{hold_fenced_then, lease, Held, LetGo, Tracker};
use crate::safety_randomized::{inject_until_done, ms, Mix};
use quorum_lock::testing::{DriftClock, TestCluster};
use quorum_lock::{Error, LockMode, LockerConfig};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use tokio::time::sleep;

/// The drift bound with the default lease: 60 s / (60 s − 10 s).
const BOUND: f64 = 1.2;
/// The rates every clock keeps to within the bound: the fastest locker
/// runs 1.09 / 0.92 ≈ 1.185 times as fast as the slowest holder.
const WITHIN: (f64, f64) = (0.92, 1.09);
/// The wall clock offsets every clock keeps to, in nanoseconds: any two
/// agree within the fencing tolerance of 1 s when they run at one rate.
/// (They do not for long: a wall clock runs at its clock's rate, so rates
/// that differ by a few percent take them apart within seconds, and
/// fencing tokens are then out of reach where they disagree.)
const OFFSET: i64 = 500_000_000;
/// Clients within the bound: the lock test's injector cuts off
/// `client-0` … `client-3`.
const CLIENTS: usize = 4;
const RESOURCES: [&str; 3] = ["a", "b", "c"];

#[derive(Debug, Default)]
struct Within {
    ops: usize,
    acquired: usize,
    lost: usize,
    long_kept: usize,
    fenced: usize,
    fence_failed: usize,
    rate_changes: usize,
    offset_changes: usize,
    faults: usize,
    /// The largest ratio of a locker's rate to a client's that was in
    /// force at once.
    widest: f64,
    violation: Option<String>,
    fencing: Option<String>,
    problems: Vec<String>,
}

async fn within_worker(
    id: usize,
    cluster: Arc<TestCluster>,
    clock: DriftClock,
    tracker: Arc<Tracker>,
    budget: Arc<AtomicUsize>,
    report: Arc<Mutex<Within>>,
    seed: u64,
) {
    let owner = format!("client-{id}");
    let ds = client(
        &cluster,
        &owner,
        seed.wrapping_mul(31).wrapping_add(id as u64),
        &clock,
    );
    let mut rng = SmallRng::seed_from_u64(seed ^ (0x9e37_79b9 * (id as u64 + 1)));
    while take_op(&budget) {
        let mut names = RESOURCES.to_vec();
        names.shuffle(&mut rng);
        names.truncate(if rng.random_bool(0.3) { 2 } else { 1 });
        let mode = if rng.random_bool(0.6) {
            LockMode::Write
        } else {
            LockMode::Read
        };
        let patience = ms(1_000..90_000, &mut rng);
        // Long holds outlast the validity: only refreshes keep them, and a
        // partition from a majority makes them hinge on expiry.
        let work = match rng.random_range(0..10) {
            0..=5 => ms(0..3_000, &mut rng),
            6..=7 => ms(3_000..30_000, &mut rng),
            _ => ms(60_000..120_000, &mut rng),
        };
        let mutex = ds.rw_mutex(names).expect("valid names");
        let held = match Held::acquire(&mutex, mode, patience).await {
            Ok(held) => held,
            Err(e) => {
                {
                    let mut r = report.lock().unwrap();
                    r.ops += 1;
                    match e {
                        Error::Timeout
                        | Error::QuorumUnavailable { .. }
                        | Error::Quarantined { .. } => {}
                        e => r.problems.push(format!("{owner}: acquire failed with {e}")),
                    }
                }
                sleep(ms(0..3_000, &mut rng)).await;
                continue;
            }
        };
        let uid = held.uid().to_owned();
        let fence = rng.random_bool(0.5);
        let outcome = hold_fenced_then(&tracker, &owner, held, work, LetGo::Unlock, fence).await;
        record_hold(&report, &owner, &uid, work, &outcome);
        sleep(ms(0..3_000, &mut rng)).await;
    }
}

fn record_hold(
    report: &Mutex<Within>,
    owner: &str,
    uid: &str,
    work: Duration,
    outcome: &crate::harness::Outcome,
) {
    let mut r = report.lock().unwrap();
    r.ops += 1;
    r.acquired += 1;
    r.lost += usize::from(outcome.signalled);
    r.long_kept += usize::from(work > lease().validity && !outcome.signalled);
    match &outcome.fenced {
        Some(Ok(_)) => r.fenced += 1,
        // Under faults a token may be out of reach or the lock lost, and
        // wall clocks that drifted apart by more than the tolerance
        // refuse each other's floors.
        Some(Err(
            Error::LockLost | Error::QuorumUnavailable { .. } | Error::Quarantined { .. },
        )) => r.fence_failed += 1,
        Some(Err(Error::InvalidArgument(m))) if m.contains("ahead of the clock of") => {
            r.fence_failed += 1
        }
        Some(Err(e)) => r
            .problems
            .push(format!("{owner}, lock {uid}: fencing_token: {e}")),
        None => {}
    }
    if let Some(breach) = outcome.contract_breach() {
        r.problems.push(format!("{owner}, lock {uid}: {breach}"));
    }
}

/// Changes the rate of a random clock (a locker's or a client's) within
/// [`WITHIN`] every few seconds, and now and then its wall clock offset,
/// until `done`.
async fn drive_clocks(
    lockers: Vec<DriftClock>,
    clients: Vec<DriftClock>,
    done: Arc<AtomicBool>,
    report: Arc<Mutex<Within>>,
    mut rng: SmallRng,
) {
    let widest = |lockers: &[DriftClock], clients: &[DriftClock]| {
        let fastest = lockers.iter().map(DriftClock::rate).fold(0.0, f64::max);
        let slowest = clients
            .iter()
            .map(DriftClock::rate)
            .fold(f64::MAX, f64::min);
        fastest / slowest
    };
    for _ in 0..MAX_STEPS {
        if done.load(Ordering::Relaxed) {
            break;
        }
        sleep(ms(2_000..40_000, &mut rng)).await;
        let all = lockers.len() + clients.len();
        let pick = rng.random_range(0..all);
        let clock = lockers
            .get(pick)
            .unwrap_or_else(|| &clients[pick - lockers.len()]);
        // Often at the edges of the band, where the lease is tightest.
        let rate = match rng.random_range(0..4) {
            0 => WITHIN.0,
            1 => WITHIN.1,
            _ => rng.random_range(WITHIN.0..=WITHIN.1),
        };
        clock.set_rate(rate).expect("a rate within the band");
        let offset = rng
            .random_bool(0.3)
            .then(|| rng.random_range(-OFFSET..=OFFSET));
        if let Some(offset) = offset {
            clock.set_offset_nanos(offset);
        }
        let mut r = report.lock().unwrap();
        r.rate_changes += 1;
        r.offset_changes += usize::from(offset.is_some());
        r.widest = r.widest.max(widest(&lockers, &clients));
    }
}

fn run_within(seed: u64, ops: usize) -> Within {
    paused_runtime().block_on(async move {
        let config = LockerConfig::default();
        let cluster = Arc::new(TestCluster::with_clocks(Mix::All.nodes(), seed, config));
        let mut rng = SmallRng::seed_from_u64(seed ^ 0xd81f);
        let lockers: Vec<DriftClock> = (0..cluster.len())
            .map(|i| cluster.clock(i).expect("a clock per node").clone())
            .collect();
        let clients: Vec<DriftClock> = (0..CLIENTS).map(|_| DriftClock::new()).collect();
        // Start apart: every clock at its own rate and wall clock offset.
        for clock in lockers.iter().chain(&clients) {
            clock
                .set_rate(rng.random_range(WITHIN.0..=WITHIN.1))
                .expect("a rate");
            clock.set_offset_nanos(rng.random_range(-OFFSET..=OFFSET));
        }
        let tracker = Arc::new(Tracker::default());
        let report = Arc::new(Mutex::new(Within::default()));
        let done = Arc::new(AtomicBool::new(false));
        let budget = Arc::new(AtomicUsize::new(ops));
        let workers: Vec<_> = clients
            .iter()
            .enumerate()
            .map(|(id, clock)| {
                tokio::spawn(within_worker(
                    id,
                    cluster.clone(),
                    clock.clone(),
                    tracker.clone(),
                    budget.clone(),
                    report.clone(),
                    seed,
                ))
            })
            .collect();
        let driver = tokio::spawn(drive_clocks(
            lockers,
            clients,
            done.clone(),
            report.clone(),
            SmallRng::seed_from_u64(seed ^ 0xc10c),
        ));
        let holders = {
            let tracker = tracker.clone();
            move || tracker.holders()
        };
        let injector = tokio::spawn(inject_until_done(
            cluster.clone(),
            holders,
            Mix::All,
            done.clone(),
            SmallRng::seed_from_u64(seed ^ 0xfa17),
        ));
        let watcher = {
            let (cluster, tracker, done, report) = (
                cluster.clone(),
                tracker.clone(),
                done.clone(),
                report.clone(),
            );
            let mut rng = SmallRng::seed_from_u64(seed ^ 0x0b5e);
            tokio::spawn(async move {
                while !done.load(Ordering::Relaxed) {
                    sleep(ms(500..3_000, &mut rng)).await;
                    let silent = tracker.silent_losses(&cluster);
                    if !silent.is_empty() {
                        report.lock().unwrap().problems.extend(silent);
                        return;
                    }
                }
            })
        };
        for w in workers {
            w.await.expect("worker panicked");
        }
        done.store(true, Ordering::Relaxed);
        driver.await.expect("clock driver panicked");
        let faults = injector.await.expect("injector panicked");
        watcher.await.expect("watcher panicked");
        // Every entry is gone a validity after the last release, on the
        // slowest locker's clock.
        sleep(config.validity.div_f64(WITHIN.0) + Duration::from_secs(1)).await;
        let mut report = Arc::try_unwrap(report)
            .expect("every task is done")
            .into_inner()
            .unwrap();
        report.faults = faults;
        let left = cluster.total_entries();
        if left > 0 {
            report.problems.push(format!(
                "{left} entries still on the lockers after every release"
            ));
        }
        report.violation = tracker.history.check().err().map(|v| v.to_string());
        report.fencing = tracker.history.check_fencing().err().map(|v| v.to_string());
        report
    })
}

/// Clocks that drift within the bound, while faults make leases hinge on
/// expiry: no second holder, no silent loss, tokens that grow.
#[test]
fn within_the_drift_bound_there_is_never_a_second_holder() {
    let (seeds, ops) = settings();
    const TEST: &str = "within::within_the_drift_bound_there_is_never_a_second_holder";
    assert!(
        WITHIN.1 / WITHIN.0 < BOUND,
        "the band must be within the bound"
    );
    let started = std::time::Instant::now();
    let mut total = Within::default();
    for (seed, report) in run_seeds(&seeds, |seed| run_within(seed, ops)) {
        let replay = replay(seed, ops, TEST);
        let report = report.unwrap_or_else(|| panic!("seed {seed} panicked (see above)\n{replay}"));
        if let Some(v) = &report.violation {
            panic!("seed {seed}: two holders within the drift bound: {v}\n{replay}");
        }
        if let Some(v) = &report.fencing {
            panic!("seed {seed}: {v}\n{replay}");
        }
        assert!(
            report.problems.is_empty(),
            "seed {seed}: {}\n{replay}",
            report.problems.join("\n")
        );
        assert_eq!(report.ops, ops, "seed {seed}: not every op ran\n{replay}");
        total.ops += report.ops;
        total.acquired += report.acquired;
        total.lost += report.lost;
        total.long_kept += report.long_kept;
        total.fenced += report.fenced;
        total.fence_failed += report.fence_failed;
        total.rate_changes += report.rate_changes;
        total.offset_changes += report.offset_changes;
        total.faults += report.faults;
        total.widest = total.widest.max(report.widest);
    }
    let summary = format!(
        "{} seeds x {ops} ops in {:?}: {} granted, {} losses signalled, {} holds past the \
         validity kept, {} fencing tokens ({} out of reach), {} rate and {} offset changes \
         (widest locker/client ratio {:.3}), {} faults",
        seeds.len(),
        started.elapsed(),
        total.acquired,
        total.lost,
        total.long_kept,
        total.fenced,
        total.fence_failed,
        total.rate_changes,
        total.offset_changes,
        total.widest,
        total.faults
    );
    println!("within the drift bound: {summary}");
    // The run did what it claims: clocks apart near the bound, locks lost
    // and kept, tokens drawn.
    if seeds.len() >= 4 {
        assert!(
            total.widest > 1.15 && total.rate_changes > 0 && total.offset_changes > 0,
            "{summary}"
        );
        assert!(
            total.lost > 0 && total.long_kept > 0 && total.fenced > 0,
            "{summary}"
        );
    }
}
