//! docs/semaphore.md: a permit's `is_lost()` and `lost()` "say that it was
//! lost before anyone else can be given its slot"; docs/guarantees.md: the
//! drift bound is a locker's clock less than 1.2 times as fast as a
//! holder's. A permit holder cut off from every locker, with clocks just
//! inside the bound, while a client of the same count waits in line.
#![cfg(feature = "testing")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorum_lock::testing::{DriftClock, TestCluster};
use quorum_lock::{Dsync, LockerConfig};
use tokio::time::{sleep, Instant};

fn client(cluster: &TestCluster, owner: &str, clock: &DriftClock) -> Dsync {
    Dsync::builder(cluster.net_lockers())
        .owner(owner)
        .rng_seed(11)
        .clock(clock.clone())
        .build()
        .expect("valid settings")
}

#[tokio::test(start_paused = true)]
async fn a_waiter_gets_the_slot_only_after_the_cut_off_holder_knows_its_permit_is_lost() {
    for (lockers, holder_rate) in [(1.199, 1.0), (1.0, 1.0 / 1.199), (1.0995, 0.917)] {
        for shared_count in [false, true] {
            for cut_ms in [0u64, 3, 4_999, 9_999, 10_001, 23_456, 49_000] {
                let cluster = Arc::new(TestCluster::with_clocks(3, 9, LockerConfig::default()));
                cluster.set_rate(lockers, &[0, 1, 2]).unwrap();
                let (hc, cc) = (DriftClock::new(), DriftClock::new());
                hc.set_rate(holder_rate).unwrap();
                let (h, c) = (client(&cluster, "h", &hc), client(&cluster, "c", &cc));
                let sem = h.semaphore("jobs", 2).unwrap();
                let (permit, other) = if shared_count {
                    // The second permit shares the first's count, which is
                    // older than its slot.
                    let first = sem.acquire().await.unwrap();
                    sleep(Duration::from_millis(7_300)).await;
                    let second = sem.acquire().await.unwrap();
                    drop(first);
                    (second, None)
                } else {
                    let both = sem.acquire().await.unwrap();
                    let two = sem.acquire().await.unwrap();
                    (both, Some(two))
                };
                let lost_at = Arc::new(Mutex::new(None));
                let watcher = tokio::spawn({
                    let lost = permit.lost();
                    let lost_at = lost_at.clone();
                    async move {
                        lost.await;
                        *lost_at.lock().unwrap() = Some(Instant::now());
                    }
                });
                // With a shared count one slot is free: fill it first.
                let filler = if shared_count {
                    Some(c.semaphore("jobs", 2).unwrap().acquire().await.unwrap())
                } else {
                    None
                };
                let contender = tokio::spawn({
                    let s = c.semaphore("jobs", 2).unwrap();
                    async move {
                        let g = s.acquire().await;
                        (Instant::now(), g)
                    }
                });
                sleep(Duration::from_millis(cut_ms)).await;
                cluster.partition("h", &[0, 1, 2]).unwrap();
                let (granted_at, g) = contender.await.unwrap();
                let g = g.unwrap();
                let lost = *lost_at.lock().unwrap();
                assert!(
                    lost.is_some_and(|l| l <= granted_at),
                    "lockers at {lockers}, holder at {holder_rate:.4}, shared count \
                     {shared_count}, cut {cut_ms} ms: the waiter got slot {:?} at \
                     {granted_at:?}, the holder's loss signalled at {lost:?}",
                    g.slots()
                );
                watcher.abort();
                drop((g, filler, other, permit));
            }
        }
    }
}
