//! A late lock call (one held on the wire past its own timeout) reaches a
//! lagging locker after the lock was released and confirmed: the locker
//! refuses it for a validity after its latest release of that uid, so no
//! entry comes back (docs/guarantees.md, "No leaks from cancellation or
//! failure"). Written by a review of an unlock sent at release to a
//! locker whose lock call had not answered (not kept): that unlock started
//! a `LocalLocker`'s record of the uid before the call's undo, the record
//! keeps the first release's time, and both tests failed with it.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::{LockerConfig, NetLocker};
use tokio::time::{sleep, sleep_until, Instant};

const SEED: u64 = 149;

/// Three lockers (validity 60 s). "a" locks "res": nodes 0 and 1 grant at
/// once; the lock call to node 2 is on the wire for 60.5 s. "a" unlocks at
/// once (confirmed by 0 and 1); the release sends node 2 an unlock ahead
/// (t = 0). The lock call to node 2 times out at 1 s, and its undo unlocks
/// node 2 again (t = 1 s), which node 2 answers. The lock call lands at
/// 60.5 s: 59.5 s after node 2's latest release of the uid, within its
/// validity, and it must be refused.
#[tokio::test(start_paused = true)]
async fn a_late_lock_call_is_refused_within_a_validity_of_the_lockers_latest_release_of_its_uid() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::with_config(3, SEED, LockerConfig::default());
    let late = Arc::new(AtomicBool::new(true));
    let delayed = Arc::new(AtomicUsize::new(0));
    let links = common::one_node_with_late_locks(
        cluster.net_lockers(),
        2,
        &late,
        &delayed,
        Duration::from_millis(60_500),
    );
    let a = common::seeded(links, "a", SEED);
    let start = Instant::now();

    let held = a.rw_mutex(["res"]).unwrap().lock().await.unwrap();
    let uid = held.uid().to_owned();
    late.store(false, Ordering::SeqCst);
    assert_eq!(
        delayed.load(Ordering::SeqCst),
        1,
        "one lock call to node 2 is on its way"
    );
    held.unlock()
        .await
        .expect("nodes 0 and 1 confirm the unlock");
    let node2 = cluster.lockers()[2].clone();

    // The call to node 2 times out at 1 s and its undo unlocks node 2.
    sleep(Duration::from_secs(2)).await;
    let unlocks_seen = cluster.nodes()[2]
        .stats(quorum_lock::testing::CallKind::Unlock)
        .seen;
    eprintln!(
        "at {:?}: node 2 has seen {unlocks_seen} unlock(s) of {uid}",
        start.elapsed()
    );
    assert!(
        !node2.snapshot().iter().any(|e| e.uid == uid),
        "nothing of {uid} on node 2 yet"
    );

    // The lock call lands at 60.5 s; look at 65 s.
    sleep_until(start + Duration::from_secs(65)).await;
    let left: Vec<String> = node2.snapshot().into_iter().map(|e| e.uid).collect();
    eprintln!("at {:?}: node 2 keeps {left:?}", start.elapsed());
    assert!(
        !left.contains(&uid),
        "a's unlock of {uid} was confirmed at once, and node 2 released {uid} again at about \
         1 s (the lock call's undo), yet the late lock call that landed at 60.5 s (59.5 s later, \
         within the 60 s validity) was granted: node 2 keeps {left:?} (until it expires at \
         about 120 s). Node 2 remembers the uid from the unlock sent ahead at 0 s only."
    );
}

/// The same with four lockers and a read lock (read quorum 2, write quorum
/// 3): "r" reads "res", granted by nodes 0 and 1, its calls to nodes 2 and
/// 3 on the wire for 60.5 s; "r" unlocks at once, confirmed. Both late
/// read-lock calls are granted at 60.5 s, so at 65 s, with nobody holding
/// anything, a writer's `try_lock` is refused (it needs 3 of 4 lockers
/// free) until those entries expire at about 120 s. Before the change,
/// both late calls were refused (nodes 2 and 3 released the uid at 1 s).
#[tokio::test(start_paused = true)]
async fn a_released_read_lock_does_not_shut_writers_out_for_a_validity() {
    use quorum_lock::testing::{CallKind, Relay, Route};
    eprintln!("seed {SEED}");
    let cluster = TestCluster::with_config(4, SEED, LockerConfig::default());
    let late = Arc::new(AtomicBool::new(true));
    let links: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| -> Arc<dyn NetLocker> {
            if i < 2 {
                return l;
            }
            let late = late.clone();
            Arc::new(Relay::new(l, move |kind, _| {
                if matches!(kind, CallKind::Lock | CallKind::RLock) && late.load(Ordering::SeqCst) {
                    Route::Late(Duration::from_millis(60_500))
                } else {
                    Route::Forward
                }
            }))
        })
        .collect();
    let r = common::seeded(links.clone(), "r", SEED);
    let w = common::seeded(links, "w", SEED + 1);
    let start = Instant::now();

    let held = r.rw_mutex(["res"]).unwrap().read().await.unwrap();
    let uid = held.uid().to_owned();
    late.store(false, Ordering::SeqCst);
    held.unlock()
        .await
        .expect("nodes 0 and 1 confirm the unlock");
    sleep(Duration::from_secs(2)).await;
    assert_eq!(cluster.total_entries(), 0, "nothing held at 2 s");

    sleep_until(start + Duration::from_secs(65)).await;
    let left: Vec<(usize, String)> = cluster
        .lockers()
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.snapshot().into_iter().map(move |e| (i, e.uid)))
        .collect();
    eprintln!(
        "at {:?}: entries {left:?} (released uid {uid})",
        start.elapsed()
    );
    let writer = w.rw_mutex(["res"]).unwrap().try_lock().await;
    assert!(
        writer.is_ok(),
        "at 65 s nobody holds \"res\" (r's read lock {uid} was released, confirmed, at 0 s), yet \
         a writer's try_lock fails with {:?}: nodes keep {left:?}",
        writer.err()
    );
}
