//! Reproduces a past break: a lost lock whose loss a refresh lane declared on a runtime that then ended kept its entries on the locker still holding it after its holder let go, and `finish_releases` said every release was done.
//!
//! docs/guarantees.md, "A lost lock is freed once its holder lets go": "The
//! entries of a lost lock are force-unlocked a safety margin after the loss
//! is declared ... As soon as the holder drops its guard (or `unlock()`
//! returns `Error::LockLost`), they go at once instead", and
//! "`Dsync::finish_releases(bound)` waits for these releases". "Any
//! runtime": "an acquiring runtime that is idle or gone holds nothing up".
//! `Dsync::finish_releases` (src/lock/dsync.rs): it waits until every
//! release handed to the background has finished, "the entries of lost
//! locks" among them, and fails with `ReleasesPending` when some still run.
//!
//! What happens instead: the lane on the acquiring runtime declares the
//! loss (two of three lockers answer "not held") and spawns the
//! force-unlock there, waiting out the margin or the holder. That runtime
//! is shut down; the task goes with it and, unlike a release (every unlock
//! is "owed"), queues nothing. The guard's `unlock()` outside any runtime
//! then finds its lease no longer registered (the lane took it), so it
//! only returns `LockLost`; the third locker, answering all along, keeps
//! the entry until it expires, and `finish_releases` on a new runtime
//! returns `Ok` at once with the entry still there.
#![cfg(feature = "testing")]

use std::time::Duration;

use futures::executor::block_on;
use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Error, Lease, LockArgs, LockerConfig, NetLocker, WriteGuard};

const SEED: u64 = 3627;

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

/// Lockers and lease with a 6 s validity and a 2 s margin, refreshed every
/// 100 ms. The lock "x" is taken on runtime X; lockers 0 and 1 are forced
/// open by name, so X's lane sees a quorum answer "not held" and declares
/// the loss at once; X is shut down 400 ms later, well inside the margin.
/// Returns the cluster, the coordinator, the guard and when X ended.
fn lost_on_a_runtime_gone_since() -> (TestCluster, Dsync, WriteGuard, std::time::Instant) {
    eprintln!("seed {SEED}");
    let validity = Duration::from_secs(6);
    let cluster = TestCluster::with_config(
        3,
        SEED,
        LockerConfig {
            validity,
            ..LockerConfig::default()
        },
    );
    let ds = Dsync::builder(cluster.net_lockers())
        .owner("a")
        .rng_seed(SEED)
        .lease(Lease {
            validity,
            safety_margin: Duration::from_secs(2),
            refresh_interval: Duration::from_millis(100),
        })
        .build()
        .expect("valid coordinator");
    let acquiring = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let guard = acquiring.block_on(async {
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
        // The lane's next refreshes find the lock gone on two of three.
        tokio::time::timeout(Duration::from_secs(2), guard.lost())
            .await
            .expect("the loss is declared within a few refreshes");
        tokio::time::sleep(Duration::from_millis(400)).await;
        guard
    });
    assert!(guard.is_lost(), "the lane declared the loss");
    acquiring.shutdown_timeout(Duration::from_secs(1));
    (cluster, ds, guard, std::time::Instant::now())
}

#[test]
fn a_lost_lock_declared_on_a_runtime_gone_since_is_freed_once_its_holder_unlocks() {
    let (cluster, _ds, guard, shut) = lost_on_a_runtime_gone_since();
    let uid = guard.uid().to_owned();
    let before = block_on(holding(&cluster, &uid));
    assert_eq!(
        before,
        [false, false, true],
        "locker 2 still holds the lost lock's entry before the unlock"
    );
    let unlocked = block_on(guard.unlock());
    assert!(
        matches!(unlocked, Err(Error::LockLost)),
        "unlock says the lock was lost: {unlocked:?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let left = block_on(holding(&cluster, &uid));
    let at = shut.elapsed();
    eprintln!("{at:?} after the acquiring runtime ended, lockers holding the uid: {left:?}");
    assert!(
        at < Duration::from_millis(4500),
        "checked before the lockers could expire the entry: {at:?}"
    );
    assert!(
        !left.iter().any(|h| *h),
        "unlock() returned LockLost and the lost lock's entry stayed on a locker that answers: \
         {left:?}"
    );
}

#[test]
fn finish_releases_waits_for_a_lost_lock_declared_on_a_runtime_gone_since() {
    let (cluster, ds, guard, shut) = lost_on_a_runtime_gone_since();
    let uid = guard.uid().to_owned();
    drop(guard);
    let finishing = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let finished = finishing.block_on(ds.finish_releases(Duration::from_secs(2)));
    let left = block_on(holding(&cluster, &uid));
    let at = shut.elapsed();
    eprintln!("{at:?} after the acquiring runtime ended: finish_releases {finished:?}, lockers holding the uid: {left:?}");
    assert!(
        at < Duration::from_millis(4500),
        "checked before the lockers could expire the entry: {at:?}"
    );
    if finished.is_ok() {
        assert!(
            !left.iter().any(|h| *h),
            "finish_releases returned Ok with the guard dropped and the lost lock's entry still \
             on a locker that answers: {left:?}"
        );
    }
}
