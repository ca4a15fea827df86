//! Reproduces a past break: a `finish_releases` call whose own sends of the unlocks it took back all land at its bound reports `ReleasesPending` for them, counted before they were sent.
//!
//! `Dsync::finish_releases` (rustdoc): "Fails with
//! [`Error::ReleasesPending`] when releases are still running at the
//! bound"; docs/guarantees.md, "Any runtime": a release on a runtime no
//! longer driven is taken back and sent by `finish_releases` itself.
//!
//! The scene, on tokio's paused clock: guard "a" is dropped on runtime
//! `r1`, which is not driven again, so its release is a batch on its way.
//! Locker 0 takes unlocks at once but replies 1 s late (the unlock timeout
//! is 5 s). `finish_releases(1 s)` takes the batch back and sends it: the
//! three unlocks land, the last reply arriving at the call's bound; nothing
//! is owed or running any more, yet the call fails.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common::hooked::Late;
use crate::common::release_on_its_way::ReleaseOnItsWay;
use crate::common::{self};
use quorum_lock::Error;

const SEED: u64 = 7402;

#[test]
fn finish_releases_is_ok_when_the_unlocks_it_sent_land_at_its_bound() {
    let scene = ReleaseOnItsWay::new(SEED, |locker, slow| {
        locker.unlocks_late_while(slow, Late::Replying, Duration::from_secs(1))
    });

    let paused = common::paused_runtime();
    let (finished, took, left, again) = paused.block_on(async {
        let start = tokio::time::Instant::now();
        let finished = scene.ds.finish_releases(Duration::from_secs(1)).await;
        let took = start.elapsed();
        let left = scene.holding();
        let again = scene.ds.finish_releases(Duration::ZERO).await;
        (finished, took, left, again)
    });
    eprintln!(
        "finish_releases(1 s): {finished:?} after {took:?}; lockers holding a then {left:?}; a \
         finish_releases(0) right after: {again:?}"
    );
    assert_eq!(
        left,
        [false, false, false],
        "control: every unlock landed by the bound"
    );
    assert!(
        again.is_ok(),
        "control: nothing is owed or running right after"
    );
    assert!(
        !matches!(finished, Err(Error::ReleasesPending { .. })),
        "every unlock it sent landed by its bound and nothing else was owed, yet \
         finish_releases(1 s) gave {finished:?}"
    );
}

/// The same with no time at all: `finish_releases(0)` takes back the
/// release of a guard dropped on a runtime no longer driven and sends it to
/// three lockers that answer at once; all three unlocks land within the
/// call, which still reports them pending.
#[test]
fn finish_releases_with_a_zero_bound_is_ok_when_the_unlocks_it_sent_landed_at_once() {
    eprintln!("seed {SEED}");
    let nodes = common::nodes(3);
    let ds = common::client(common::as_lockers(&nodes), SEED);
    let r1 = common::runtime();
    let a = r1.block_on(common::try_lock(&ds, "a"));
    let uid = a.uid().to_owned();
    // Dropped on r1, which is not driven again: its release task never runs.
    common::drop_on_an_idle_runtime(&r1, a);
    let before = common::holding(&nodes, &uid);
    let paused = common::paused_runtime();
    let (finished, left) = paused.block_on(async {
        let finished = ds.finish_releases(Duration::ZERO).await;
        (finished, common::holding(&nodes, &uid))
    });
    eprintln!(
        "lockers holding a before {before:?}; finish_releases(0): {finished:?}; then {left:?}"
    );
    assert_eq!(
        before,
        [true, true, true],
        "control: the release had not run"
    );
    assert_eq!(
        left,
        [false, false, false],
        "control: the call sent the unlocks and every one landed"
    );
    assert!(
        finished.is_ok(),
        "every unlock it sent landed within the call and nothing else was owed, yet \
         finish_releases(0) gave {finished:?}"
    );
    drop(r1);
}
