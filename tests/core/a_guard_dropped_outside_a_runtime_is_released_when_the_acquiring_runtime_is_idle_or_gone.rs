//! Reproduces a past break: a guard dropped outside any runtime handed its release to the runtime that acquired it, so when that runtime was gone nothing was ever sent (and `finish_releases` said `Ok`), and when it was idle nothing was sent while it stayed idle.
//!
//! docs/guarantees.md, "Any runtime": "Releases run on the runtime that
//! drops or unlocks the guard (on a private one for `unlock()` outside any
//! runtime ...), and failed unlocks are drained by a task on each runtime
//! that queued one, so an acquiring runtime that is idle or gone holds
//! nothing up." "No leaks from cancellation or failure": dropping "a guard
//! never leaves an entry behind on a reachable locker". "A lost lock is
//! freed once its holder lets go": "`Dsync::finish_releases(bound)` waits
//! for these releases, and every other one handed to the background,
//! before a process exits." A guard dropped on a plain thread spawns its
//! release on the acquiring runtime's handle: on a runtime that was shut
//! down the task is dropped unrun, its count among the outstanding
//! releases with it, so every locker (all of them answering) keeps the
//! entry until it expires and `finish_releases` on a new runtime returns
//! `Ok` at once; on a runtime that is alive but not driven the release
//! waits for it.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, WriteGuard};

const SEED: u64 = 3663;

/// Locks "x" on three lockers from runtime `acquiring`.
fn lock_on(acquiring: &tokio::runtime::Runtime, ds: &Dsync) -> WriteGuard {
    acquiring.block_on(async { crate::common::try_lock_x(ds).await })
}

/// The guard is taken on a runtime that is then shut down, and dropped on
/// a plain thread. On a second runtime, `finish_releases(2 s)` should
/// leave no locker holding the uid, or say releases are pending; 1 s
/// later no locker (all three answer) should hold it.
#[test]
fn a_guard_dropped_outside_a_runtime_is_released_when_the_acquiring_runtime_is_gone() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let ds = Dsync::builder(cluster.net_lockers())
        .owner("a")
        .rng_seed(SEED)
        .build()
        .expect("valid coordinator");
    let acquiring = common::runtime();
    let guard = lock_on(&acquiring, &ds);
    let uid = guard.uid().to_owned();
    acquiring.shutdown_timeout(Duration::from_secs(1));

    drop(guard);

    let later = common::runtime();
    later.block_on(async {
        let finished = tokio::time::timeout(
            Duration::from_secs(5),
            ds.finish_releases(Duration::from_secs(2)),
        )
        .await
        .expect("finish_releases returns within its bound");
        let left = crate::common::holding(cluster.lockers(), &uid);
        eprintln!("finish_releases: {finished:?}; lockers holding the uid: {left:?}");
        assert!(
            finished.is_err() || !left.iter().any(|h| *h),
            "finish_releases returned Ok while every locker still held the uid of a guard \
             dropped outside a runtime: {left:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        let left = crate::common::holding(cluster.lockers(), &uid);
        eprintln!("1 s later, lockers holding the uid: {left:?}");
        assert!(
            !left.iter().any(|h| *h),
            "a guard dropped outside a runtime after the acquiring runtime was shut down was \
             never released: {left:?}"
        );
    });
}

/// The guard is taken on a runtime that stays alive but is no longer
/// driven, and dropped on a plain thread. Watched from a second runtime,
/// no locker should hold the uid 2 s later.
#[test]
fn a_guard_dropped_outside_a_runtime_is_released_while_the_acquiring_runtime_is_idle() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let ds = Dsync::builder(cluster.net_lockers())
        .owner("a")
        .rng_seed(SEED)
        .build()
        .expect("valid coordinator");
    let acquiring = common::runtime();
    let guard = lock_on(&acquiring, &ds);
    let uid = guard.uid().to_owned();

    drop(guard);

    let watching = common::runtime();
    watching.block_on(async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let left = crate::common::holding(cluster.lockers(), &uid);
        eprintln!("2 s after the drop, lockers holding the uid: {left:?}");
        assert!(
            !left.iter().any(|h| *h),
            "a guard dropped outside a runtime was not released while the acquiring runtime \
             stayed idle: {left:?}"
        );
    });
    drop(acquiring);
}
