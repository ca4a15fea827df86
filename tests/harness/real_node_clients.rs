//! The clients of the randomized tests over real servers (Redis nodes, SQL
//! databases): each takes read and write locks on a few names, holds them
//! for a random time racing the loss signal (some longer than the
//! validity, kept alive by refreshes alone), then unlocks or drops them,
//! and tallies what happened.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use quorum_lock::{Dsync, Error, Lease, LockMode, NetLocker, RetryPolicy, Timeouts};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use tokio::time::sleep;

use super::{hold_fenced_then, Held, LetGo, Tracker};

/// The names the clients lock, one or two at a time.
pub const RESOURCES: [&str; 3] = ["a", "b", "c"];

/// What the clients of a seed did, and what they found wrong.
#[derive(Debug, Default)]
pub struct Tally {
    pub ops: usize,
    pub acquired: usize,
    pub writes: usize,
    pub timeouts: usize,
    pub lost: usize,
    pub fenced: usize,
    pub problems: Vec<String>,
}

impl Tally {
    pub fn add(&mut self, other: &Tally) {
        self.ops += other.ops;
        self.acquired += other.acquired;
        self.writes += other.writes;
        self.timeouts += other.timeouts;
        self.lost += other.lost;
        self.fenced += other.fenced;
    }
}

/// A number from the environment, or `default`.
pub fn env_or(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

/// The lease of every client: refreshed every 250 ms, trusted for 1.5 s of
/// a 2 s validity, which is also every node's validity and quarantine.
pub fn lease() -> Lease {
    Lease {
        validity: Duration::from_secs(2),
        refresh_interval: Duration::from_millis(250),
        safety_margin: Duration::from_millis(500),
    }
}

/// A client of `lockers` with the settings every seed uses: the lease
/// above, calls cut at 400 ms (refreshes at 300 ms), retries from 10 ms to
/// 200 ms, choices drawn from `seed`.
pub fn client(lockers: Vec<Arc<dyn NetLocker>>, owner: &str, seed: u64) -> Dsync {
    Dsync::builder(lockers)
        .owner(owner)
        .lease(lease())
        .timeouts(Timeouts {
            acquire: Duration::from_millis(400),
            refresh: Duration::from_millis(300),
            unlock: Duration::from_secs(1),
            ..Timeouts::default()
        })
        .retry(RetryPolicy {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(200),
        })
        .rng_seed(seed)
        .build()
        .expect("valid client settings")
}

pub fn ms(range: std::ops::Range<u64>, rng: &mut SmallRng) -> Duration {
    Duration::from_millis(rng.random_range(range))
}

pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn take_op(budget: &AtomicUsize) -> bool {
    budget
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
}

/// One client: random names and modes, held for a random time racing the
/// loss signal, then unlocked or dropped; `rng_seed` draws its choices.
pub async fn worker(
    ds: Dsync,
    owner: String,
    tracker: Arc<Tracker>,
    budget: Arc<AtomicUsize>,
    tally: Arc<Mutex<Tally>>,
    rng_seed: u64,
) {
    let mut rng = SmallRng::seed_from_u64(rng_seed);
    while take_op(&budget) {
        let mut names: Vec<&str> = RESOURCES.to_vec();
        names.shuffle(&mut rng);
        names.truncate(if rng.random_bool(0.3) { 2 } else { 1 });
        let mode = if rng.random_bool(0.6) {
            LockMode::Write
        } else {
            LockMode::Read
        };
        let patience = ms(200..2_000, &mut rng);
        let work = match rng.random_range(0..100) {
            0..=79 => ms(0..300, &mut rng),
            80..=94 => ms(300..1_500, &mut rng),
            // Longer than the validity: kept alive by refreshes alone.
            _ => ms(2_500..4_000, &mut rng),
        };
        let mutex = ds.rw_mutex(names).expect("valid names");
        let held = match Held::acquire(&mutex, mode, patience).await {
            Ok(held) => held,
            Err(e) => {
                {
                    let mut r = lock(&tally);
                    r.ops += 1;
                    match e {
                        // A wait that gave up says why; under faults, any of these.
                        Error::Timeout
                        | Error::QuorumUnavailable { .. }
                        | Error::Quarantined { .. } => r.timeouts += 1,
                        e => r.problems.push(format!("{owner}: acquire failed with {e}")),
                    }
                }
                sleep(ms(0..200, &mut rng)).await;
                continue;
            }
        };
        let uid = held.uid().to_owned();
        let let_go = if rng.random_bool(0.1) {
            LetGo::Drop
        } else {
            LetGo::Unlock
        };
        let fence = rng.random_bool(0.5);
        let outcome = hold_fenced_then(&tracker, &owner, held, work, let_go, fence).await;
        {
            let mut r = lock(&tally);
            r.ops += 1;
            r.acquired += 1;
            r.writes += usize::from(mode == LockMode::Write);
            r.lost += usize::from(outcome.signalled);
            match &outcome.fenced {
                Some(Ok(_)) => r.fenced += 1,
                Some(Err(
                    Error::LockLost | Error::QuorumUnavailable { .. } | Error::Quarantined { .. },
                ))
                | None => {}
                Some(Err(e)) => r
                    .problems
                    .push(format!("{owner}, lock {uid}: fencing: {e}")),
            }
            if let Some(breach) = outcome.contract_breach() {
                r.problems.push(format!("{owner}, lock {uid}: {breach}"));
            }
        }
        sleep(ms(0..200, &mut rng)).await;
    }
}

/// How long the injector may take to end once told: its step (a pause of
/// at most 800 ms and a fault to start, a SQL table's reset within 20 s).
pub const INJECTOR_ENDS_WITHIN: Duration = Duration::from_secs(30);

/// Runs a [`worker`] for each client (its owner and its `Dsync`, the seed
/// of its choices from `rng_seed(i)`) on a shared budget of `ops`
/// operations, beside the seed's fault `injector`. When the workers are
/// done, or `limit` has passed, it tells the injector (`done`) and waits
/// for it, [`INJECTOR_ENDS_WITHIN`] at most, then aborts it. Returns what
/// the workers tallied, with a problem for a worker that panicked, for
/// workers out of time, and for an injector that failed or did not end
/// (with what it was doing then: `injecting`).
#[allow(clippy::too_many_arguments)]
pub async fn run_workers(
    clients: Vec<(String, Dsync)>,
    tracker: &Arc<Tracker>,
    ops: usize,
    rng_seed: impl Fn(usize) -> u64,
    mut injector: tokio::task::JoinHandle<()>,
    injecting: impl Fn() -> Option<String>,
    done: &AtomicBool,
    limit: Duration,
) -> Tally {
    let tally = Arc::new(Mutex::new(Tally::default()));
    let budget = Arc::new(AtomicUsize::new(ops));
    let workers: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, (owner, ds))| {
            tokio::spawn(worker(
                ds,
                owner,
                tracker.clone(),
                budget.clone(),
                tally.clone(),
                rng_seed(i),
            ))
        })
        .collect();
    let finished = tokio::time::timeout(limit, futures::future::join_all(workers)).await;
    done.store(true, Ordering::Relaxed);
    let injected = tokio::time::timeout(INJECTOR_ENDS_WITHIN, &mut injector).await;
    let stuck_at = injected.is_err().then(&injecting);
    if injected.is_err() {
        injector.abort();
        let _ = injector.await;
    }
    let mut tally = std::mem::take(&mut *lock(&tally));
    match finished {
        Ok(results) => {
            for result in results {
                if let Err(e) = result {
                    tally.problems.push(format!("a worker panicked: {e}"));
                }
            }
        }
        Err(_) => tally
            .problems
            .push(format!("the workers did not finish within {limit:?}")),
    }
    match injected {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tally.problems.push(format!("the injector failed: {e}")),
        Err(_) => tally.problems.push(format!(
            "the injector did not end within {INJECTOR_ENDS_WITHIN:?} of the workers \
             (starting then: {})",
            stuck_at.flatten().unwrap_or_else(|| "nothing".into())
        )),
    }
    tally
}
