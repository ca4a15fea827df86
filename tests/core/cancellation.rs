//! Dropping acquire and unlock futures at any point must not leak grants,
//! even while lockers answer slowly.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use quorum_lock::DRWMutex;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::{sleep, timeout};

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// Locker `i` answers after `5 + 10 * i` ms (cycling), so quorums form one
/// grant at a time and a cancellation can land between any two of them.
/// Odd lockers act at once and are slow to reply, so a cancelled caller can
/// miss a grant that exists; even ones are slow to receive the request.
fn staggered(n: usize, seed: u64) -> FaultyCluster {
    let c = faulty_cluster(n, seed);
    for (i, f) in c.faults.iter().enumerate() {
        let wait = ms(5 + 10 * (i as u64 % 6));
        f.set(if i % 2 == 0 {
            Behaviour::Delay(wait)
        } else {
            Behaviour::SlowReply(wait)
        });
    }
    c
}

async fn acquire(m: &DRWMutex, write: bool) -> bool {
    if write {
        m.lock().await.is_ok()
    } else {
        m.read().await.is_ok()
    }
}

#[tokio::test(start_paused = true)]
async fn an_acquire_cancelled_at_any_point_leaves_nothing() {
    let mut cancelled_after_grants = 0;
    for n in SIZES {
        for write in [true, false] {
            for step in 0..14 {
                let c = staggered(n, step);
                let ctx = format!("n = {n}, write = {write}, cancelled at {} ms", step * 5);
                let m = c.ds.rw_mutex(["r"]).unwrap();
                let finished = timeout(ms(step * 5), acquire(&m, write)).await;
                let granted: usize = c.faults.iter().map(|f| f.grants()).sum();
                cancelled_after_grants += usize::from(finished.is_err() && granted > 0);
                assert_no_leaks(&c.nodes, &ctx).await;
            }
        }
    }
    assert!(
        cancelled_after_grants > 0,
        "no cancellation hit a partial grant"
    );
}

/// The waiter fails rounds against a holder and backs off, so cancelling it
/// lands in a round, during a background release, or in the backoff sleep.
#[tokio::test(start_paused = true)]
async fn a_waiting_acquire_cancelled_at_any_point_leaves_nothing() {
    for n in SIZES {
        for step in 0..20 {
            let c = staggered(n, step);
            let ctx = format!("n = {n}, cancelled at {} ms", step * 7);
            let m = c.ds.rw_mutex(["r"]).unwrap();
            let held = m.lock().await.unwrap();
            let holder = tokio::spawn(async move {
                sleep(ms(60)).await;
                held.unlock().await
            });
            let waited = timeout(ms(step * 7), acquire(&m, step % 2 == 0)).await;
            assert!(
                waited.is_err() || step * 7 > 60,
                "{ctx}: got in beside the holder"
            );
            holder.await.unwrap().unwrap();
            assert_no_leaks(&c.nodes, &ctx).await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn aborted_tasks_leave_nothing_whether_waiting_or_holding() {
    for n in SIZES {
        let c = staggered(n, n as u64);
        let m = c.ds.rw_mutex(["r"]).unwrap();
        let holding = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..30u64)
            .map(|i| {
                let (m, holding) = (m.clone(), holding.clone());
                let write = i % 3 != 0;
                let task = tokio::spawn(async move { acquire_and_hold(&m, write, &holding).await });
                (i, task)
            })
            .collect();
        for (i, task) in tasks {
            sleep(ms(i % 7 * 3)).await;
            task.abort();
        }
        let ctx = format!("n = {n}");
        assert!(
            holding.load(Ordering::SeqCst) > 0,
            "{ctx}: no task was aborted while holding"
        );
        assert_no_leaks(&c.nodes, &ctx).await;
    }
}

/// Acquires and parks the guard inside the future, so aborting the task
/// drops a held guard.
async fn acquire_and_hold(m: &DRWMutex, write: bool, holding: &AtomicUsize) -> bool {
    let guard = if write {
        m.lock().await.map(|g| Box::new(g) as Box<dyn Send>)
    } else {
        m.read().await.map(|g| Box::new(g) as Box<dyn Send>)
    };
    let Ok(guard) = guard else { return false };
    holding.fetch_add(1, Ordering::SeqCst);
    sleep(ms(1000)).await;
    drop(guard);
    true
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_unlock_still_releases() {
    let mut cancelled = 0;
    for n in SIZES {
        for step in 0..10 {
            let c = staggered(n, step);
            let ctx = format!("n = {n}, unlock cancelled at {} ms", step * 6);
            let m = c.ds.rw_mutex(["r"]).unwrap();
            let w = m.lock().await.unwrap();
            sleep(ms(100)).await;
            let unlocked = timeout(ms(step * 6), w.unlock()).await;
            cancelled += usize::from(unlocked.is_err());
            assert_no_leaks(&c.nodes, &ctx).await;

            let r = m.read().await.unwrap();
            // Created but never polled.
            drop(r.unlock());
            assert_no_leaks(&c.nodes, &ctx).await;
        }
    }
    assert!(cancelled > 0, "no unlock was cancelled midway");
}

/// Random mixes of cancelled acquires, aborted tasks and cancelled unlocks,
/// while the lockers' latencies change under them.
#[tokio::test(start_paused = true)]
async fn random_cancellations_leave_nothing() {
    for seed in 0..6u64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let n = [3, 4, 5][seed as usize % 3];
        let c = faulty_cluster(n, seed);
        let stats = Arc::new(Stats::default());
        let workers: Vec<_> = (0..8)
            .map(|_| {
                let worker_seed = rng.random();
                tokio::spawn(worker(c.ds.clone(), worker_seed, stats.clone()))
            })
            .collect();
        for _ in 0..200 {
            let i = rng.random_range(0..n);
            let wait = ms(rng.random_range(0..40));
            c.faults[i].set(if rng.random_bool(0.5) {
                Behaviour::Delay(wait)
            } else {
                Behaviour::SlowReply(wait)
            });
            sleep(ms(rng.random_range(1..20))).await;
        }
        for w in workers {
            let done = timeout(Duration::from_secs(3600), w).await;
            done.unwrap_or_else(|_| panic!("seed {seed}: worker stuck"))
                .unwrap_or_else(|e| panic!("seed {seed}: worker panicked: {e}"));
        }
        let ctx = format!("seed {seed}, {stats:?}");
        assert!(
            stats.all_exercised(),
            "{ctx}: some cancellation path never ran"
        );
        assert_no_leaks(&c.nodes, &ctx).await;
    }
}

#[derive(Debug, Default)]
struct Stats {
    acquires_cancelled: AtomicUsize,
    unlocks_cancelled: AtomicUsize,
    tasks_aborted: AtomicUsize,
    held: AtomicUsize,
}

impl Stats {
    fn all_exercised(&self) -> bool {
        [
            &self.acquires_cancelled,
            &self.unlocks_cancelled,
            &self.tasks_aborted,
            &self.held,
        ]
        .iter()
        .all(|c| c.load(Ordering::SeqCst) > 0)
    }
}

async fn worker(ds: quorum_lock::Dsync, seed: u64, stats: Arc<Stats>) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let names = ["a", "b", "c"];
    for _ in 0..40 {
        let first = rng.random_range(0..names.len());
        let width = rng.random_range(1..=2).min(names.len() - first);
        let m = ds
            .rw_mutex(names[first..first + width].iter().copied())
            .unwrap();
        let write = rng.random_bool(0.5);
        let patience = ms(rng.random_range(0..60));
        match rng.random_range(0..3) {
            0 => {
                let holding = Arc::new(AtomicUsize::new(0));
                let task = tokio::spawn({
                    let (m, holding) = (m.clone(), holding.clone());
                    async move { acquire_and_hold(&m, write, &holding).await }
                });
                sleep(patience).await;
                task.abort();
                stats.tasks_aborted.fetch_add(1, Ordering::SeqCst);
                stats
                    .held
                    .fetch_add(holding.load(Ordering::SeqCst), Ordering::SeqCst);
            }
            _ if write => match timeout(patience, m.lock()).await {
                Err(_) => {
                    stats.acquires_cancelled.fetch_add(1, Ordering::SeqCst);
                }
                Ok(guard) => {
                    stats.held.fetch_add(1, Ordering::SeqCst);
                    sleep(ms(rng.random_range(0..20))).await;
                    let unlock = timeout(ms(rng.random_range(0..10)), guard.unwrap().unlock());
                    if unlock.await.is_err() {
                        stats.unlocks_cancelled.fetch_add(1, Ordering::SeqCst);
                    }
                }
            },
            _ => match timeout(patience, m.read()).await {
                Err(_) => {
                    stats.acquires_cancelled.fetch_add(1, Ordering::SeqCst);
                }
                Ok(guard) => {
                    stats.held.fetch_add(1, Ordering::SeqCst);
                    sleep(ms(rng.random_range(0..20))).await;
                    drop(guard);
                }
            },
        }
    }
}
