//! Reproduces a past break: a drain task whose runtime shuts down mid-batch puts back in the queue the unlocks of its batch that landed already, and `finish_releases` then counts them among the releases still running.
//!
//! `Error::ReleasesPending` (rustdoc): `pending` is "Releases still
//! running". docs/guarantees.md, "Any runtime": "so at the bound only
//! those still on their way are pending"; `QueueState::owed`: one unlock
//! per uid, "one that lands frees the entry for all of them".
//!
//! The scene: locker 0 refuses unlocks while guards "a", "b" and "c" are
//! dropped on runtime X (paused), so their unlocks go to its queue, and
//! X's drain task retries them. Locker 0 takes unlocks again, but "b"'s
//! and "c"'s arrive 60 s late (the unlock timeout is 5 s). X's drain
//! task's probe ("a") lands, and while it sends "b" and "c" locker 0
//! refuses unlocks again and X is dropped. `finish_releases(1 s)` on
//! runtime P: two unlocks are owed at its bound ("b"'s and "c"'s: no
//! locker holds "a"), yet it reports three.
#![cfg(feature = "testing")]

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::release_on_its_way::DrainBatchUnderWay;
use crate::common::{self};
use quorum_lock::Error;

const SEED: u64 = 7912;

#[test]
fn finish_releases_counts_no_unlock_that_landed_before_its_drain_tasks_runtime_shut_down_mid_batch()
{
    let scene = DrainBatchUnderWay::new(SEED, |_, _| Duration::from_secs(60));
    let (nodes, ds, down) = (&scene.nodes, &scene.ds, &scene.down);
    let x = common::paused_runtime();
    let landed = x.block_on(scene.run(&["b", "c"]));
    let (ua, ub, uc, freed_a) = (
        &landed.a,
        &landed.others[0],
        &landed.others[1],
        landed.freed_a,
    );
    // Locker 0 refuses unlocks again (so that what the queue holds stays
    // there), and X shuts down with its drain task sending "b" and "c".
    down.store(true, Ordering::SeqCst);
    drop(x);
    let p = common::paused_runtime();
    let finished = p.block_on(ds.finish_releases(Duration::from_secs(1)));
    let at_bound = (
        common::holding(nodes, ua),
        common::holding(nodes, ub),
        common::holding(nodes, uc),
    );
    eprintln!(
        "freed a: {freed_a}; finish_releases(1 s): {finished:?}; holding (a, b, c) at its \
         bound: {at_bound:?}"
    );
    assert!(freed_a, "control: X's drain task's unlock of a landed");
    assert_eq!(
        at_bound,
        (
            vec![false, false, false],
            vec![true, false, false],
            vec![true, false, false]
        ),
        "control: at the bound locker 0 holds b and c, and no locker holds a"
    );
    let Err(Error::ReleasesPending { pending, .. }) = finished else {
        panic!("control: b's and c's unlocks to locker 0 are still owed at the bound, got {finished:?}");
    };
    assert_eq!(
        pending, 2,
        "two unlocks (b's and c's, to locker 0) are still owed at the bound; the call counts too \
         a's, which X's drain task saw land before its runtime shut down"
    );
}
