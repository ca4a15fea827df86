#![cfg(feature = "testing")]
//! A holder that disappears without unlocking does not block a resource for
//! longer than the validity plus one refresh interval.

use std::time::Duration;

use crate::harness::{client, lease, Held, Seeded};
use quorum_lock::testing::TestCluster;
use quorum_lock::LockMode;
use tokio::sync::oneshot;
use tokio::time::{sleep, sleep_until, timeout, Instant};

const SEED: u64 = 41;
const RESOURCE: &str = "jobs/nightly";

/// The longest a crashed holder may keep others out.
fn crash_bound() -> Duration {
    lease().validity + lease().refresh_interval
}

#[tokio::test(start_paused = true)]
async fn a_crashed_holder_is_replaced_within_validity_plus_a_refresh() {
    let lease = lease();
    for n in [3, 5] {
        for mode in [LockMode::Write, LockMode::Read] {
            // Just after and just before a refresh.
            for crash_after in [Duration::from_secs(21), Duration::from_secs(29)] {
                let seed = SEED + n as u64 + crash_after.as_secs();
                let ctx = format!("seed {seed}: n = {n}, {mode:?}, crash at +{crash_after:?}");
                let cluster = TestCluster::new(n, seed);
                let zombie = client(&cluster, "zombie", seed);
                let other = client(&cluster, "other", seed + 1);
                let t0 = Instant::now();
                let held = Held::acquire(
                    &zombie.rw_mutex([RESOURCE]).unwrap(),
                    mode,
                    Duration::from_secs(1),
                )
                .await
                .unwrap_or_else(|e| panic!("{ctx}: {e}"));
                let told = held.loss_token();

                // The process dies: no unlock, no more refreshes reach anyone.
                sleep_until(t0 + crash_after).await;
                std::mem::forget(held);
                cluster
                    .partition("zombie", &(0..n).collect::<Vec<_>>())
                    .unwrap();
                let crashed = Instant::now();

                let mutex = other.rw_mutex([RESOURCE]).unwrap();
                let second = timeout(crash_bound() * 2, mutex.lock())
                    .await
                    .unwrap_or_else(|_| {
                        panic!("{ctx}: still blocked after {:?}", crash_bound() * 2)
                    })
                    .seeded(seed, "lock after the crash");
                let waited = Instant::now() - crashed;
                // The entries were refreshed at most one interval before the
                // crash, and are honoured until they expire.
                assert!(
                    waited <= crash_bound() && waited + lease.refresh_interval >= lease.validity,
                    "{ctx}: the next writer waited {waited:?} after the crash"
                );
                assert!(
                    told.is_cancelled(),
                    "{ctx}: the zombie's keeper never gave up"
                );
                second.unlock().await.seeded(seed, "unlock");
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn an_aborted_holder_task_releases_at_once() {
    for n in [3, 5] {
        let seed = SEED + 100 + n as u64;
        let cluster = TestCluster::new(n, seed);
        let a = client(&cluster, "client-a", seed);
        let b = client(&cluster, "client-b", seed + 1);
        let (acquired, holding) = oneshot::channel();
        let worker = tokio::spawn(async move {
            let guard = a
                .rw_mutex([RESOURCE])
                .unwrap()
                .try_lock()
                .await
                .seeded(seed, "lock");
            let _ = acquired.send(());
            // The work never ends; the guard lives in this task.
            std::future::pending::<()>().await;
            drop(guard);
        });
        holding.await.seeded(seed, "first lock");
        let mutex = b.rw_mutex([RESOURCE]).unwrap();
        let waiter = tokio::spawn(async move {
            let guard = mutex.lock_timeout(Duration::from_secs(600)).await;
            (Instant::now(), guard.seeded(seed, "lock after the abort"))
        });
        sleep(Duration::from_secs(25)).await;
        assert!(
            !waiter.is_finished(),
            "seed {seed}: n = {n}: granted while held"
        );
        worker.abort();
        let aborted = Instant::now();
        let (granted, guard) = waiter.await.seeded(seed, "waiter");
        // Dropping the guard released it; the waiter only had to notice
        // within its capped backoff (1 s).
        let waited = granted - aborted;
        assert!(
            waited <= Duration::from_millis(1100),
            "seed {seed}: n = {n}: granted {waited:?} after the abort"
        );
        guard.unlock().await.seeded(seed, "unlock");
        assert_eq!(cluster.total_entries(), 0, "seed {seed}: n = {n}");
    }
}
