#![cfg(feature = "testing")]
//! Randomized election safety: candidates campaign, lead for a while,
//! proclaim new values, resign, drop or lose their leadership, while
//! observers watch and the fault injector of the lock test slows, drops,
//! refuses, hangs, partitions, crashes and restarts lockers (losing pushes
//! with them). For every seed:
//! * no two candidates believe they lead (`is_lost()` false) at once;
//! * terms strictly increase from leader to leader, and no two leaders
//!   share a term;
//! * every observer's sequence of (term, seq) only goes up: a leader it
//!   reported is not reported again, also not after a "no leader";
//! * `leader()` right after a confirmed resign reports no leader or a
//!   newer one;
//! * every value an observer reports was proclaimed by that term's leader
//!   (or, for a term whose campaign lost its lock between drawing the term
//!   and returning, is that campaign's value: its holder proclaimed it
//!   while it held the lock, and the entry carries it until it is freed);
//! * once the last leader is gone and the faults healed, every observer
//!   reports "no leader" within a validity plus two re-checks.
//!
//! `ELECTION_SEEDS` (default 40, 20 in a debug build) seeds of
//! `ELECTION_OPS` (default 40) campaigns; `ELECTION_SEED=n` runs seed `n`
//! alone.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::harness::{client, instant_of, lease};
use crate::safety_randomized::{env_or, inject_until_done, ms, Mix};
use quorum_lock::testing::{EventKind, History, TestCluster};
use quorum_lock::{Error, Leader, LockMode, LockerConfig};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::{sleep, Instant};

const CANDIDATES: usize = 4;
const OBSERVERS: usize = 2;
const ELECTION: &str = "leader";

const DEFAULT_SEEDS: u64 = if cfg!(debug_assertions) { 20 } else { 40 };

fn settings() -> (Vec<u64>, usize) {
    let ops = env_or("ELECTION_OPS", 40) as usize;
    let seeds = match std::env::var("ELECTION_SEED") {
        Ok(_) => vec![env_or("ELECTION_SEED", 0)],
        Err(_) => (0..env_or("ELECTION_SEEDS", DEFAULT_SEEDS)).collect(),
    };
    (seeds, ops)
}

/// term -> (uid of its leader, every value it proclaimed or tried to).
type Proclaimed = HashMap<u64, (String, BTreeSet<Vec<u8>>)>;

/// What every task of one seed shares.
#[derive(Default)]
struct Shared {
    /// Leaderships as write holds of the election's resource, with their
    /// terms as fencing tokens: `History::check` finds two leaders at once,
    /// `check_fencing` a term that did not grow.
    history: History,
    proclaimed: Mutex<Proclaimed>,
    /// Every value a campaign started with.
    campaigned: Mutex<BTreeSet<Vec<u8>>>,
    /// Owners leading now, for the injector to cut off.
    leading: Mutex<Vec<String>>,
    /// When the last leadership ended (resigned, dropped or lost).
    last_end: Mutex<Option<Instant>>,
    problems: Mutex<Vec<String>>,
    leaderships: AtomicUsize,
    resign_retries: AtomicUsize,
    lost: AtomicUsize,
    /// Reads of the leader right after a confirmed resign.
    read_after_resign: AtomicUsize,
}

impl Shared {
    fn problem(&self, what: String) {
        self.problems.lock().unwrap().push(what);
    }

    fn proclaiming(&self, term: u64, uid: &str, value: &[u8]) {
        let mut map = self.proclaimed.lock().unwrap();
        let (leader, values) = map
            .entry(term)
            .or_insert_with(|| (uid.to_owned(), BTreeSet::new()));
        if leader != uid {
            let other = leader.clone();
            drop(map);
            self.problem(format!(
                "term {term} given to two leaders: {other} and {uid}"
            ));
            return;
        }
        values.insert(value.to_vec());
    }

    fn ended(&self, owner: &str, at: Instant) {
        self.leading.lock().unwrap().retain(|o| o != owner);
        let mut last = self.last_end.lock().unwrap();
        *last = Some(last.map_or(at, |l| l.max(at)));
    }
}

fn take_op(budget: &AtomicUsize) -> bool {
    budget
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
}

/// How a leadership ends when it was not lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Resign,
    Drop,
}

async fn candidate(
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
        seed.wrapping_mul(131).wrapping_add(id as u64),
    );
    let election = ds.election(ELECTION).expect("valid name");
    let resource = election.resource().to_owned();
    let mut rng = SmallRng::seed_from_u64(seed ^ (0x5eed_u64 * (id as u64 + 1)));
    let mut n = 0;
    while take_op(&budget) {
        n += 1;
        let value = format!("{owner}/{n}");
        let patience = ms(1_000..60_000, &mut rng);
        shared
            .campaigned
            .lock()
            .unwrap()
            .insert(value.as_bytes().to_vec());
        let mut leading = match election.campaign_timeout(value.as_bytes(), patience).await {
            Ok(leading) => leading,
            Err(Error::Timeout | Error::QuorumUnavailable { .. } | Error::Quarantined { .. }) => {
                sleep(ms(0..3_000, &mut rng)).await;
                continue;
            }
            Err(err) => {
                shared.problem(format!("{owner}: campaign failed with {err}"));
                continue;
            }
        };
        let (uid, term) = (leading.uid().to_owned(), leading.term());
        if leading.is_lost() {
            shared.problem(format!(
                "{owner}: campaign returned a lost leadership (term {term})"
            ));
        }
        shared
            .history
            .acquired(&uid, [resource.as_str()], LockMode::Write);
        shared.history.fenced(&uid, term);
        shared.proclaiming(term, &uid, value.as_bytes());
        shared.leading.lock().unwrap().push(owner.clone());
        shared.leaderships.fetch_add(1, Ordering::Relaxed);
        let lost_at = instant_of(leading.lost());

        // Lead for a few steps, proclaiming now and then.
        let steps = rng.random_range(0..5);
        for step in 0..steps {
            let pause = match rng.random_range(0..10) {
                0 => ms(30_000..90_000, &mut rng),
                _ => ms(0..5_000, &mut rng),
            };
            sleep(pause).await;
            if leading.is_lost() {
                break;
            }
            if rng.random_bool(0.5) {
                let next = format!("{owner}/{n}/{step}");
                shared.proclaiming(term, &uid, next.as_bytes());
                match leading.proclaim(next.as_bytes()).await {
                    Ok(()) => {}
                    Err(
                        Error::LockLost
                        | Error::QuorumUnavailable { .. }
                        | Error::Quarantined { .. },
                    ) => {}
                    Err(err) => shared.problem(format!("{owner}: proclaim failed with {err}")),
                }
            }
        }
        if leading.is_lost() {
            // Lost: its end is when the signal fired, which is at least the
            // safety margin before any locker could free it.
            let at = lost_at.await.expect("the loss signal task");
            shared.history.record_at(at, &uid, EventKind::LostSignalled);
            shared.lost.fetch_add(1, Ordering::Relaxed);
            shared.ended(&owner, at);
            drop(leading);
        } else {
            lost_at.abort();
            let ending = if rng.random_bool(0.8) {
                Ending::Resign
            } else {
                Ending::Drop
            };
            // Recorded before the lockers can free it.
            shared.history.released(&uid);
            shared.ended(&owner, Instant::now());
            match ending {
                Ending::Resign => {
                    let confirmed = match leading.resign().await {
                        Ok(()) => true,
                        Err(err) => {
                            if !matches!(err, Error::ReleaseUnconfirmed { .. }) {
                                shared.problem(format!("{owner}: resign failed with {err}"));
                            }
                            // A failed resign is retried once; the drop
                            // retries in the background after that.
                            shared.resign_retries.fetch_add(1, Ordering::Relaxed);
                            leading.resign().await.is_ok()
                        }
                    };
                    if !leading.is_lost() {
                        shared.problem(format!("{owner}: a resigned leadership is not lost"));
                    }
                    if confirmed {
                        // The resigned term is on fewer lockers than a
                        // write quorum from now on.
                        match election.leader().await {
                            Ok(Some(after)) if after.term <= term => shared.problem(format!(
                                "{owner}: leader() after a confirmed resign of term {term} \
                                 reported {after}"
                            )),
                            Ok(_) => {
                                shared.read_after_resign.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(_) => {}
                        }
                    }
                }
                Ending::Drop => drop(leading),
            }
        }
        sleep(ms(0..3_000, &mut rng)).await;
    }
}

/// What one observer reported, in order.
type Reports = Vec<(Instant, Option<Leader>)>;

async fn observer(
    id: usize,
    cluster: Arc<TestCluster>,
    stop: Arc<tokio::sync::Notify>,
    seed: u64,
) -> Reports {
    let ds = client(&cluster, &format!("client-{id}"), seed ^ 0x0b5e ^ id as u64);
    let mut observer = ds
        .election(ELECTION)
        .expect("valid name")
        .observe()
        .expect("inside a runtime");
    let mut reports = Vec::new();
    let stopped = stop.notified();
    tokio::pin!(stopped);
    loop {
        tokio::select! {
            () = &mut stopped => return reports,
            item = observer.recv() => match item {
                Some(item) => reports.push((Instant::now(), item)),
                None => return reports,
            },
        }
    }
}

#[derive(Debug, Default)]
struct Report {
    leaderships: usize,
    lost: usize,
    resign_retries: usize,
    read_after_resign: usize,
    faults: usize,
    observed: usize,
    problems: Vec<String>,
}

fn run_seed(seed: u64, ops: usize, mix: Mix) -> Report {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let config = LockerConfig::default();
        let cluster = Arc::new(TestCluster::with_config(mix.nodes(), seed, config));
        let shared = Arc::new(Shared::default());
        let budget = Arc::new(AtomicUsize::new(ops));
        let done = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(tokio::sync::Notify::new());
        let observers: Vec<_> = (0..OBSERVERS)
            .map(|id| tokio::spawn(observer(id, cluster.clone(), stop.clone(), seed)))
            .collect();
        let candidates: Vec<_> = (0..CANDIDATES)
            .map(|id| {
                tokio::spawn(candidate(
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
                move || shared.leading.lock().unwrap().clone()
            },
            mix,
            done.clone(),
            SmallRng::seed_from_u64(seed ^ 0xe1ec),
        ));
        for c in candidates {
            c.await.expect("candidate panicked");
        }
        done.store(true, Ordering::Relaxed);
        let faults = injector.await.expect("injector panicked");
        let healed = Instant::now();

        // Every leader is gone and the faults healed: within a validity
        // (entries of a leader cut off when it ended expire by then) and two
        // re-checks, every observer says nobody leads.
        let recheck = quorum_lock::Timeouts::default().wait_recheck;
        let bound = lease().validity + recheck * 2;
        sleep(bound + Duration::from_secs(1)).await;
        stop.notify_waiters();
        let mut report = Report {
            faults,
            ..Report::default()
        };
        let proclaimed = shared.proclaimed.lock().unwrap().clone();
        let campaigned = shared.campaigned.lock().unwrap().clone();
        let last_end = shared.last_end.lock().unwrap().unwrap_or(healed);
        for (id, task) in observers.into_iter().enumerate() {
            let reports = task.await.expect("observer panicked");
            report.observed += reports.len();
            let known = Known {
                proclaimed: &proclaimed,
                campaigned: &campaigned,
            };
            check_observer(
                id,
                &reports,
                &known,
                last_end.max(healed),
                bound,
                &mut report.problems,
            );
        }
        if let Err(v) = shared.history.check() {
            report.problems.push(format!("two leaders at once: {v}"));
        }
        if let Err(v) = shared.history.check_fencing() {
            report.problems.push(format!("terms did not grow: {v}"));
        }
        report.leaderships = shared.leaderships.load(Ordering::Relaxed);
        report.lost = shared.lost.load(Ordering::Relaxed);
        report.resign_retries = shared.resign_retries.load(Ordering::Relaxed);
        report.read_after_resign = shared.read_after_resign.load(Ordering::Relaxed);
        report
            .problems
            .extend(shared.problems.lock().unwrap().drain(..));
        report
    })
}

/// What candidates proclaimed, for checking what observers reported.
struct Known<'a> {
    proclaimed: &'a Proclaimed,
    campaigned: &'a BTreeSet<Vec<u8>>,
}

fn check_observer(
    id: usize,
    reports: &Reports,
    known: &Known<'_>,
    quiet_from: Instant,
    bound: Duration,
    problems: &mut Vec<String>,
) {
    let mut newest: Option<(u64, u64)> = None;
    for (at, item) in reports {
        let Some(leader) = item else { continue };
        let key = (leader.term, leader.seq);
        // Each leader is reported once: the same (term, seq) again (after
        // a "no leader" in between) is a gone leader coming back.
        if newest.is_some_and(|n| key <= n) {
            problems.push(format!(
                "observer {id} went back from {newest:?} to {key:?} at {at:?}"
            ));
        }
        newest = Some(key);
        let known = match known.proclaimed.get(&leader.term) {
            Some((_, values)) => values.contains(&leader.value[..]),
            // A campaign that drew this term and proclaimed, then lost the
            // lock before returning: only its first value can be there.
            None => leader.seq == 0 && known.campaigned.contains(&leader.value[..]),
        };
        if !known {
            problems.push(format!(
                "observer {id} reported {leader} that term's leader never proclaimed"
            ));
        }
    }
    match reports.last() {
        Some((_, None)) => {
            let since = reports
                .iter()
                .rposition(|(_, item)| item.is_some())
                .map(|i| reports[i + 1].0);
            if let Some(at) = since
                && at > quiet_from + bound
            {
                problems.push(format!(
                    "observer {id} reported no leader {:?} after the last leader ended, \
                         more than the bound of {bound:?}",
                    at - quiet_from
                ));
            }
        }
        Some((_, Some(leader))) => problems.push(format!(
            "observer {id} still reports {leader} after every leader ended"
        )),
        None => problems.push(format!("observer {id} reported nothing")),
    }
}

fn run_mix(mix: Mix) {
    let (seeds, ops) = settings();
    let mut total = Report::default();
    let mut failed = Vec::new();
    for &seed in &seeds {
        let report = run_seed(seed, ops, mix);
        if !report.problems.is_empty() {
            failed.push(format!(
                "seed {seed} ({mix:?}; replay with ELECTION_SEED={seed}): {:#?}",
                report.problems
            ));
        }
        total.leaderships += report.leaderships;
        total.lost += report.lost;
        total.resign_retries += report.resign_retries;
        total.read_after_resign += report.read_after_resign;
        total.faults += report.faults;
        total.observed += report.observed;
    }
    eprintln!(
        "election {mix:?}: {} seeds, {} leaderships ({} lost, {} resign retries, {} reads after a resign), {} faults, {} observer reports",
        seeds.len(),
        total.leaderships,
        total.lost,
        total.resign_retries,
        total.read_after_resign,
        total.faults,
        total.observed
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    // The run must have exercised what it checks.
    assert!(
        total.leaderships >= seeds.len(),
        "too few leaderships: {total:?}"
    );
    assert!(
        total.read_after_resign >= seeds.len(),
        "too few reads after a confirmed resign: {total:?}"
    );
    assert!(
        total.observed >= seeds.len() * OBSERVERS * 2,
        "too few observer reports: {total:?}"
    );
}

#[test]
fn elections_under_random_faults_keep_one_leader_and_ordered_observers() {
    run_mix(Mix::All);
}

#[test]
fn elections_through_single_locker_restarts_keep_one_leader_and_ordered_observers() {
    run_mix(Mix::Restarts);
}
