//! Reproduces a past break: a lost lock's force-unlock, begun once the safety margin passed and cut short by its runtime's shutdown, queued nothing, so a locker that answers kept the entry after the holder let go, and `finish_releases` said every release was done.
//!
//! docs/guarantees.md, "Any runtime": "Every unlock is owed from the moment
//! its release is planned: a release task that a runtime shut down drops
//! unrun or cuts short queues what it had not done, and so does a lost
//! lock's clean-up (sent once the safety margin has passed or its holder
//! let go, as the task would have)." "A lost lock is freed once its holder
//! lets go": "The entries of a lost lock are force-unlocked a safety margin
//! after the loss is declared ... (a locker that cannot be reached then
//! gets the unlock through its retry queue, as above)", and
//! "`Dsync::finish_releases(bound)` waits for these releases".
//!
//! What happens instead: "x" is taken on runtime X and lost there (lockers
//! 0 and 1 forced open); locker 2 keeps the entry. The holder keeps the
//! guard; X is driven past the 2 s margin, so the declaring task claims
//! the clean-up (`LossSignal::claim_cleanup`), settles its `CleanupOwed`
//! and sends the force-unlock. The one to locker 2 is on its way (a
//! `Relay` delivering it late from a task on X) when X shuts down: the
//! call is dropped, and with the owed clean-up already settled nothing is
//! queued. The holder then drops the guard: the clean-up is claimed, so it
//! only kicks an empty queue. `finish_releases` returns `Ok` and locker 2,
//! answering every call, keeps the entry until it expires.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::executor::block_on;
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, Lease, LockArgs, LockerConfig, NetLocker};

const SEED: u64 = 36_293;

async fn holding(cluster: &TestCluster, uid: &str) -> Vec<bool> {
    let mut left = Vec::new();
    for locker in cluster.lockers() {
        let held = NetLocker::locks(&**locker)
            .await
            .expect("a local listing")
            .iter()
            .any(|l| l.uid == uid);
        left.push(held);
    }
    left
}

#[test]
fn a_lost_locks_clean_up_cut_short_by_its_runtime_shutting_down_leaves_no_entry_behind() {
    eprintln!("seed {SEED}");
    let validity = Duration::from_secs(10);
    let cluster = TestCluster::with_config(
        3,
        SEED,
        LockerConfig {
            validity,
            ..LockerConfig::default()
        },
    );
    let slow = Arc::new(AtomicBool::new(false));
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            if i != 2 {
                return l;
            }
            let slow = slow.clone();
            Arc::new(Relay::new(l, move |kind, _| {
                if kind == CallKind::ForceUnlock && slow.load(Ordering::SeqCst) {
                    Route::Late(Duration::from_secs(5))
                } else {
                    Route::Forward
                }
            })) as Arc<dyn NetLocker>
        })
        .collect();
    let ds = Dsync::builder(lockers)
        .owner("a")
        .rng_seed(SEED)
        .lease(Lease {
            validity,
            safety_margin: Duration::from_secs(2),
            refresh_interval: Duration::from_millis(100),
        })
        .build()
        .expect("valid coordinator");
    let x = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let taken = Instant::now();
    let guard = x.block_on(async {
        let guard = crate::common::try_lock_x(&ds).await;
        let forced = LockArgs {
            uid: "".into(),
            resources: vec!["x".to_string()].into(),
            owner: "admin".into(),
            source: "test".into(),
            quorum: 1,
        };
        for locker in &cluster.lockers()[..2] {
            let forced = NetLocker::force_unlock(&**locker, &forced)
                .await
                .expect("a local force-unlock");
            assert!(forced, "the entry was forced open");
        }
        slow.store(true, Ordering::SeqCst);
        tokio::time::timeout(Duration::from_secs(2), guard.lost())
            .await
            .expect("the loss is declared within a few refreshes");
        // Past the 2 s margin: the clean-up is sent; locker 2's is late.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        guard
    });
    let uid = guard.uid().to_owned();
    assert_eq!(
        block_on(holding(&cluster, &uid)),
        [false, false, true],
        "locker 2's force-unlock is still on its way"
    );
    x.shutdown_timeout(Duration::from_secs(1));
    slow.store(false, Ordering::SeqCst);
    // The holder lets go: "they go at once".
    drop(guard);
    let finishing = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let finished = finishing.block_on(ds.finish_releases(Duration::from_secs(2)));
    let mut left = block_on(holding(&cluster, &uid));
    while left.iter().any(|h| *h) && taken.elapsed() < Duration::from_secs(7) {
        std::thread::sleep(Duration::from_millis(20));
        left = block_on(holding(&cluster, &uid));
    }
    let at = taken.elapsed();
    eprintln!("{at:?} after the lock was taken: finish_releases {finished:?}, lockers holding the uid {left:?}");
    assert!(
        at < Duration::from_secs(9),
        "checked before locker 2 could expire the entry (10 s validity): {at:?}"
    );
    assert!(
        !left.iter().any(|h| *h),
        "the lost lock's clean-up was cut short by its runtime's shutdown and the holder let go, \
         yet {at:?} after the lock was taken a locker that answers still holds the entry: {left:?} \
         (finish_releases gave {finished:?})"
    );
}
