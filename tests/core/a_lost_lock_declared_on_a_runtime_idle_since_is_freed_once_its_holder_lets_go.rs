//! Reproduces a past break: a lost lock whose loss a refresh lane declared on a runtime that is no longer driven kept its entry on a locker that answers after its holder let go, and `finish_releases` could not finish it.
//!
//! docs/guarantees.md, "A lost lock is freed once its holder lets go": "As
//! soon as the holder drops its guard (or `unlock()` returns
//! `Error::LockLost`), they go at once instead", and
//! "`Dsync::finish_releases(bound)` waits for these releases". "Any
//! runtime": "What is started outside any runtime (an `unlock()` on a plain
//! thread, a guard ... dropped there) runs on a runtime the `Dsync` keeps
//! for such work ... So an acquiring runtime that is idle or gone holds
//! nothing up." `Dsync::finish_releases` (src/lock/dsync.rs): "once its
//! guard is dropped ... they are freed at once. So drop every guard, then
//! call this"; it fails with `ReleasesPending` only "when releases are
//! still running at the bound (a lock server is unreachable, say)".
//!
//! What happens instead: the lane on the acquiring runtime declares the
//! loss (two of three lockers answer "not held") and spawns the lost
//! lock's clean-up there, waiting out the margin or the holder. That
//! runtime is then idle (a current-thread runtime whose `block_on`
//! returned), not gone: the clean-up task is neither run nor dropped, so
//! its owed unlocks are never queued. The holder's `unlock()` on a plain
//! thread (or its drop) only kicks the retry queues, which are empty; the
//! third locker, answering all along, keeps the entry until it expires, and
//! `finish_releases` on another runtime, with every locker answering, waits
//! out its bound for the idle runtime and fails with `ReleasesPending`.
//! And while the holder keeps its guard, the entry is not force-unlocked
//! "a safety margin after the loss is declared" either: it stays until the
//! locker expires it, a full validity after its last refresh.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use futures::executor::block_on;
use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Error, Lease, LockArgs, LockerConfig, NetLocker, WriteGuard};

use crate::common::holding;

const SEED: u64 = 36_281;

/// Lockers and lease with a 6 s validity and a 2 s margin, refreshed every
/// 100 ms. The lock "x" is taken on the current-thread runtime X; lockers 0
/// and 1 are forced open by name, so X's lane sees a quorum answer "not
/// held" and declares the loss; X is driven 200 ms more, so that the lane
/// has declared it, then left idle (kept, never driven again while the
/// test checks). Returns the cluster, the coordinator, the guard, X and
/// when the loss was seen.
fn lost_on_a_runtime_idle_since() -> (
    TestCluster,
    Dsync,
    WriteGuard,
    tokio::runtime::Runtime,
    Instant,
) {
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
    let (guard, seen) = acquiring.block_on(async {
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
        tokio::time::timeout(Duration::from_secs(2), guard.lost())
            .await
            .expect("the loss is declared within a few refreshes");
        let seen = Instant::now();
        // Two more refresh intervals: the lane has declared the loss and
        // spawned its clean-up here.
        tokio::time::sleep(Duration::from_millis(200)).await;
        (guard, seen)
    });
    assert!(guard.is_lost(), "the lane declared the loss");
    // `acquiring` is kept but no longer driven: idle, not gone.
    (cluster, ds, guard, acquiring, seen)
}

/// Polls (at most `bound`, every 20 ms) until no locker holds `uid`;
/// returns what the lockers hold at the end.
fn wait_until_freed(cluster: &TestCluster, uid: &str, bound: Duration) -> Vec<bool> {
    let start = Instant::now();
    loop {
        let left = holding(cluster.lockers(), uid);
        if !left.iter().any(|h| *h) || start.elapsed() >= bound {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_lost_lock_declared_on_a_runtime_idle_since_is_freed_once_its_holder_unlocks() {
    let (cluster, _ds, guard, acquiring, seen) = lost_on_a_runtime_idle_since();
    let uid = guard.uid().to_owned();
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [false, false, true],
        "locker 2 still holds the lost lock's entry before the unlock"
    );
    let unlocked = block_on(guard.unlock());
    assert!(
        matches!(unlocked, Err(Error::LockLost)),
        "unlock says the lock was lost: {unlocked:?}"
    );
    let left = wait_until_freed(&cluster, &uid, Duration::from_millis(1000));
    let at = seen.elapsed();
    eprintln!(
        "{at:?} after the loss, with the declaring runtime idle: lockers holding the uid {left:?}"
    );
    assert!(
        at < Duration::from_millis(4500),
        "checked before the lockers could expire the entry: {at:?}"
    );
    assert!(
        !left.iter().any(|h| *h),
        "unlock() returned LockLost and, a second later, the lost lock's entry is still on a \
         locker that answers, held up by the idle runtime that declared the loss: {left:?}"
    );
    drop(acquiring);
}

#[test]
fn finish_releases_frees_a_lost_lock_declared_on_a_runtime_idle_since() {
    let (cluster, ds, guard, acquiring, seen) = lost_on_a_runtime_idle_since();
    let uid = guard.uid().to_owned();
    drop(guard);
    let finishing = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let finished = finishing.block_on(ds.finish_releases(Duration::from_millis(1000)));
    let left = holding(cluster.lockers(), &uid);
    let at = seen.elapsed();
    eprintln!("{at:?} after the loss, with the declaring runtime idle: finish_releases {finished:?}, lockers holding the uid {left:?}");
    assert!(
        at < Duration::from_millis(4500),
        "checked before the lockers could expire the entry: {at:?}"
    );
    assert!(
        finished.is_ok() && !left.iter().any(|h| *h),
        "every guard dropped and every locker answering, yet finish_releases gave {finished:?} \
         with the lost lock's entry still on {left:?}: the idle runtime that declared the loss \
         held it up"
    );
    drop(acquiring);
}
