//! Reproduces a past break: a `finish_releases` call whose own sends of a release's unlocks all land reports `ReleasesPending` for them because a second call, left unpolled, took copies of them while they were on their way.
//!
//! `Dsync::finish_releases` (rustdoc): "Fails with
//! [`Error::ReleasesPending`] when releases are still running at the
//! bound"; "A release whose task sits on a runtime that is no longer
//! driven ... is sent again from here, at once". docs/guarantees.md, "Any
//! runtime": `finish_releases` sends such a release's unlocks itself.
//!
//! The scene, on tokio's paused clock: guard "a" is dropped on runtime
//! `r1`, which is not driven again, so its release is a batch on its way.
//! Locker 0 takes unlocks at once but replies 1 s late (unlock timeout 5 s,
//! so a batch is overdue after 10 s and a little). Call A,
//! `finish_releases(3 s)`, is polled once: it takes the batch back and
//! sends it. Call B, `finish_releases(30 s)`, is polled once: it takes
//! copies of A's batch and sends them too, then is not polled again (its
//! caller stopped driving it). A is then driven alone: its three unlocks
//! land after 1 s and no locker holds "a" any more, yet A never looks at
//! B's copies again (it sent them once) and waits its 3 s for them to end,
//! failing with `ReleasesPending` though no release is running.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common::hooked::Late;
use crate::common::release_on_its_way::{poll_once, ReleaseOnItsWay};
use crate::common::{self};
use quorum_lock::Error;

const SEED: u64 = 7411;

#[test]
fn finish_releases_is_ok_when_its_own_sends_landed_though_another_call_took_a_copy_on_their_way() {
    let scene = ReleaseOnItsWay::new(SEED, |locker, slow| {
        locker.unlocks_late_while(slow, Late::Replying, Duration::from_secs(1))
    });

    let paused = common::paused_runtime();
    let (first_a, first_b, finished, took, left) = paused.block_on(async {
        let start = tokio::time::Instant::now();
        let mut call_a = Box::pin(scene.ds.finish_releases(Duration::from_secs(3)));
        let mut call_b = Box::pin(scene.ds.finish_releases(Duration::from_secs(30)));
        // One poll each: A takes the batch back and sends it; B takes copies
        // of A's batch and sends them; neither is done (locker 0 is slow).
        let first_a = poll_once(&mut call_a).await;
        let first_b = poll_once(&mut call_b).await;
        // B is not polled again; A is driven to its end.
        let finished = call_a.await;
        let took = start.elapsed();
        let left = scene.holding();
        drop(call_b);
        (first_a, first_b, finished, took, left)
    });
    eprintln!(
        "A ready at first poll: {first_a}, B: {first_b}; finish_releases(3 s) A: {finished:?} \
         after {took:?}; lockers holding a then {left:?}"
    );
    assert!(
        !first_a && !first_b,
        "control: both calls were sending to the slow locker"
    );
    assert_eq!(
        left,
        [false, false, false],
        "control: every unlock landed within A's bound"
    );
    assert!(
        !matches!(finished, Err(Error::ReleasesPending { .. })),
        "every unlock A sent landed by {took:?} and no locker holds a, yet finish_releases(3 s) \
         gave {finished:?}: it counts the copies another call took while they were on their way"
    );
}
