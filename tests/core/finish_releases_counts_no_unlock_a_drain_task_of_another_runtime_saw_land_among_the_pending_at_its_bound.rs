//! Reproduces a past break: a `finish_releases` call reaching its bound counts among the releases still running an unlock it took back from a drain task of another runtime, which that task then saw land, while that task still sends another unlock of the same batch.
//!
//! `Error::ReleasesPending` (rustdoc): `pending` is "Releases still
//! running". docs/guarantees.md, "Any runtime": "so at the bound only
//! those still on their way are pending"; `QueueState::owed`: one unlock
//! per uid, "one that lands frees the entry for all of them".
//!
//! The scene: locker 0 refuses unlocks while guards "a", "b" and "c" are
//! dropped on runtime X (paused), so their unlocks go to its queue, and
//! X's drain task retries them. Locker 0 takes unlocks again: "b"'s first
//! unlock then arrives 3 s late (and lands), every later one 60 s late (the
//! unlock timeout is 5 s), "c"'s always 60 s late. X's drain task's probe
//! ("a") lands, and X stops being driven while it sends "b" and "c". A
//! `finish_releases(1 s)` call on runtime P takes back "b" and "c" from
//! X's batch and sends them (late). X is driven 4 s more: its "b" lands
//! (locker 0 frees it). Then the call runs to its bound: one unlock is owed
//! ("c"'s), yet it reports two, its copy of "b"'s among them.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common::release_on_its_way::{poll_once, DrainBatchUnderWay};
use crate::common::{self};
use quorum_lock::Error;

const SEED: u64 = 7911;

#[test]
fn finish_releases_counts_no_unlock_a_drain_task_of_another_runtime_saw_land_among_the_pending_at_its_bound(
) {
    // "b"'s first unlock (once armed) arrives 3 s late, every later one
    // and every one of "c" 60 s late.
    let scene = DrainBatchUnderWay::new(SEED, |other, nth| {
        Duration::from_secs(if other == 0 && nth == 0 { 3 } else { 60 })
    });
    let (nodes, ds) = (&scene.nodes, &scene.ds);
    let x = common::paused_runtime();
    let landed = x.block_on(scene.run(&["b", "c"]));
    let (ua, ub, uc, freed_a) = (
        &landed.a,
        &landed.others[0],
        &landed.others[1],
        landed.freed_a,
    );
    let p = common::paused_runtime();
    let mut call = Box::pin(ds.finish_releases(Duration::from_secs(1)));
    let done_at_once = p.block_on(poll_once(&mut call));
    // X's drain task's "b" arrives and lands; its "c" is still on its way.
    x.block_on(async { tokio::time::sleep(Duration::from_secs(4)).await });
    let b_freed_before_bound = !common::holds(&nodes[0], ub);
    let finished = p.block_on(call);
    let at_bound = (
        common::holding(nodes, ua),
        common::holding(nodes, ub),
        common::holding(nodes, uc),
    );
    eprintln!(
        "freed a: {freed_a}; done at once: {done_at_once}; b freed before the bound: \
         {b_freed_before_bound}; finish_releases(1 s): {finished:?}; holding (a, b, c) at \
         its bound: {at_bound:?}"
    );
    assert!(freed_a, "control: X's drain task's unlock of a landed");
    assert!(!done_at_once, "control: the call sends b and c late");
    assert!(
        b_freed_before_bound,
        "control: X's drain task's unlock of b landed"
    );
    assert_eq!(
        at_bound,
        (
            vec![false, false, false],
            vec![false, false, false],
            vec![true, false, false]
        ),
        "control: at the bound only locker 0 holds c"
    );
    let Err(Error::ReleasesPending { pending, .. }) = finished else {
        panic!(
            "control: c's unlock to locker 0 is still on its way at the bound, got {finished:?}"
        );
    };
    assert_eq!(
        pending, 1,
        "one unlock (c's, to locker 0) is still owed at the bound; the call counts too its copy \
         of b's, which X's drain task saw land"
    );
}
