//! Reproduces a past break: a waiter's re-check that reached the lockers after the lock's confirmed unlock re-created its entries on every locker, left there until they expired.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::NetLocker;
use tokio::time::{sleep, Instant};

const SEED: u64 = 4343;

/// Three reachable lockers, none restarted. "x" holds "res"; "w" waits
/// for it in line, and its re-check of the place (about 1 s in) is slow
/// on every link. x unlocks, the lockers push w its grants, and w unlocks,
/// confirmed by all three. docs/guarantees.md ("No leaks from cancellation
/// or failure"): "calls still in flight finish in the background and undo
/// any grant they receive". The re-checks arrive after the unlock and are
/// granted; their grants are not undone, so every locker keeps w's entry
/// until it expires and nobody else can take "res" meanwhile.
#[tokio::test(start_paused = true)]
async fn a_released_lock_leaves_no_entry_behind_when_its_re_check_arrives_after_the_unlock() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let late = Arc::new(AtomicBool::new(false));
    let delayed = Arc::new(AtomicUsize::new(0));
    let links: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .map(|l| common::late_locks(l, late.clone(), delayed.clone(), Duration::from_secs(20)))
        .collect();
    let x = common::seeded(cluster.net_lockers(), "x", SEED);
    let w = common::seeded(links, "w", SEED + 1);
    let y = common::seeded(cluster.net_lockers(), "y", SEED + 2);
    let start = Instant::now();

    let held = x.rw_mutex(["res"]).unwrap().lock().await.unwrap();
    let mutex = w.rw_mutex(["res"]).unwrap();
    let wait = tokio::spawn(async move { mutex.lock().await });
    sleep(Duration::from_millis(500)).await;
    late.store(true, Ordering::SeqCst);
    sleep(Duration::from_millis(1000)).await;
    late.store(false, Ordering::SeqCst);
    let late_checks = delayed.load(Ordering::SeqCst);
    eprintln!(
        "at {:?}: w's re-checks on their way: {late_checks}",
        start.elapsed()
    );
    assert!(late_checks >= 3, "w re-checks its place within a second");
    held.unlock().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(1), wait)
        .await
        .expect("w is pushed its grants")
        .unwrap()
        .unwrap();
    guard
        .unlock()
        .await
        .expect("all three lockers confirm the unlock");
    eprintln!("at {:?}: w unlocked, confirmed", start.elapsed());

    // The re-checks land at about 21 s; give their answers time to come
    // back and any undo time to land.
    sleep(Duration::from_secs(25)).await;
    let left: Vec<(usize, String)> = cluster
        .lockers()
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.snapshot().into_iter().map(move |e| (i, e.owner)))
        .collect();
    let taken = y.rw_mutex(["res"]).unwrap().try_lock().await.map(|_| ());
    eprintln!(
        "at {:?}: entries {left:?}; y's try_lock {taken:?}",
        start.elapsed()
    );
    assert!(
        left.is_empty() && taken.is_ok(),
        "w unlocked at ~1.5 s, confirmed, yet at {:?} the lockers keep {left:?} and y's try_lock \
         of \"res\" says {taken:?}",
        start.elapsed()
    );
}
