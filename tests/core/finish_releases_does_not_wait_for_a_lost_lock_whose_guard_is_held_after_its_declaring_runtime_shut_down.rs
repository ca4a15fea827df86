//! Reproduces a past break: `finish_releases` waits out its bound and fails with `ReleasesPending` for the clean-up of a lost lock whose guard is still held, once the runtime that declared the loss shut down (its clean-up task queued its held-off unlocks), while with that runtime alive it returns `Ok` at once.
//!
//! `Dsync::finish_releases` (rustdoc): "So drop every guard, then call
//! this: a lost lock whose guard is still held is not waited for (its
//! clean-up waits for the margin or the guard, whichever comes first)."
//! docs/guarantees.md, "A lost lock is freed once its holder lets go": "a
//! lost lock whose guard is still held is a lock still held, whose
//! clean-up waits for the margin or for the guard, so it is not among
//! them". `finish_releases` fails with `ReleasesPending` only "when
//! releases are still running at the bound".
//!
//! The scene (real clock: the declaring runtime must shut down): "x" is
//! taken on runtime X (validity 6 s, margin 2 s, a refresh every 100 ms);
//! lockers 0 and 1 are forced open by name, X's lane declares the loss and
//! spawns the clean-up, waiting out the 2 s margin. The guard is kept.
//! Control: `finish_releases(500 ms)` on another runtime returns `Ok` at
//! once. Then X shuts down (its clean-up task is dropped and queues the
//! unlocks, held off for the margin), and the same call, the guard still
//! held and the margin not passed, waits its 500 ms and fails.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use quorum_lock::{LockArgs, NetLocker};

use crate::common;

const SEED: u64 = 7401;

#[test]
fn finish_releases_does_not_wait_for_a_lost_lock_whose_guard_is_held_after_its_declaring_runtime_shut_down(
) {
    eprintln!("seed {SEED}");
    let validity = Duration::from_secs(6);
    let (cluster, builder) = common::three_lockers_and_a_lease(
        SEED,
        validity,
        Duration::from_secs(2),
        Duration::from_millis(100),
    );
    let ds = builder.build().expect("valid coordinator");
    let x = common::runtime();
    let guard = x.block_on(async {
        let guard = common::try_lock_x(&ds).await;
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
        guard
    });
    let seen = Instant::now();
    assert!(guard.is_lost(), "the lane declared the loss");

    let alive = common::runtime().block_on(ds.finish_releases(Duration::from_millis(500)));
    let alive_took = seen.elapsed();
    x.shutdown_timeout(Duration::from_secs(1));
    let started = Instant::now();
    let gone = common::runtime().block_on(ds.finish_releases(Duration::from_millis(500)));
    let gone_took = started.elapsed();
    let at = seen.elapsed();
    eprintln!(
        "guard held, lost: finish_releases with X alive {alive:?} in {alive_took:?}; with X shut \
         down {gone:?} in {gone_took:?} ({at:?} after the loss)"
    );
    assert!(
        at < Duration::from_millis(1800),
        "checked before the 2 s margin passed: {at:?}"
    );
    assert!(
        alive.is_ok(),
        "control: with the declaring runtime alive the held lost lock is not waited for"
    );
    assert!(
        gone.is_ok(),
        "the lost lock's guard is still held, so its clean-up is not among the releases \
         finish_releases waits for, yet with the declaring runtime shut down it waited \
         {gone_took:?} and gave {gone:?}"
    );
    drop(guard);
}
