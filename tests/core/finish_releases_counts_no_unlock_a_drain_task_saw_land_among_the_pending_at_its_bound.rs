//! Reproduces a past break: a `finish_releases` call reaching its bound counts among the releases still running an unlock a drain task of its own runtime saw land, while that task still sends another unlock of the same batch.
//!
//! `Error::ReleasesPending` (rustdoc): `pending` is "Releases still
//! running". docs/guarantees.md, "Any runtime": "so at the bound only
//! those still on their way are pending"; an unlock "is in `pending` or in
//! a drain task's batch ... until it lands" (src/lock/unlock_queue.rs).
//!
//! The scene, on one paused runtime: locker 0 refuses unlocks (connection
//! refused) while guards "a" and "b" are dropped, so both unlocks go to its
//! queue, "a"'s first, and a drain task retries them. Locker 0 then takes
//! unlocks again, but "b"'s spends 60 s on its way (the unlock timeout is
//! 5 s). The drain task's batch is "a"'s unlock (its probe, which lands)
//! then "b"'s. Once locker 0 freed "a", `finish_releases(1 s)` is called:
//! at its bound one unlock is owed ("b"'s, still on its way), yet it
//! reports two: "a"'s, landed a second before, stays counted until the
//! drain task's whole batch ends.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common::release_on_its_way::DrainBatchUnderWay;
use crate::common::{self};
use quorum_lock::Error;

const SEED: u64 = 7811;

#[test]
fn finish_releases_counts_no_unlock_a_drain_task_saw_land_among_the_pending_at_its_bound() {
    let scene = DrainBatchUnderWay::new(SEED, |_, _| Duration::from_secs(60));
    let (nodes, ds) = (&scene.nodes, &scene.ds);
    let p = common::paused_runtime();
    let (freed_a, finished, at_bound) = p.block_on(async {
        let landed = scene.run(&["b"]).await;
        let (ua, ub) = (&landed.a, &landed.others[0]);
        let finished = ds.finish_releases(Duration::from_secs(1)).await;
        let at_bound = (common::holding(nodes, ua), common::holding(nodes, ub));
        (landed.freed_a, finished, at_bound)
    });
    eprintln!(
        "locker 0 freed a: {freed_a}; finish_releases(1 s): {finished:?}; holding (a, b) at its \
         bound: {at_bound:?}"
    );
    assert!(
        freed_a,
        "control: the drain task's unlock of a landed on locker 0"
    );
    assert_eq!(
        at_bound,
        (vec![false, false, false], vec![true, false, false]),
        "control: at the bound only locker 0 holds b, and no locker holds a"
    );
    let Err(Error::ReleasesPending { pending, .. }) = finished else {
        panic!(
            "control: b's unlock to locker 0 is still on its way at the bound, got {finished:?}"
        );
    };
    assert_eq!(
        pending, 1,
        "one unlock (b's, to locker 0) is still owed at the bound; the call counts too a's, \
         which the drain task saw land a second before"
    );
}
