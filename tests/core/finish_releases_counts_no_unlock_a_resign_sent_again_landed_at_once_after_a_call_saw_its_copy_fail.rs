//! Reproduces a past break: `finish_releases` counts among the pending unlocks that a resign sent again landed at once (answered inline by calm lockers), because an earlier call took copies back and saw them fail.
//!
//! `Error::ReleasesPending` (rustdoc): `pending` is "Releases still
//! running". docs/guarantees.md, "Any runtime": "A copy the call took back
//! and saw fail is moot, as its own landings make the others, when the
//! release itself (or a drain task) lands a copy of the same unlock".
//!
//! The scene, on tokio's paused clocks: l leads election "e" (campaigned
//! on runtime `r1`) on three lockers; lockers 0 and 1 are then cut off
//! from l (calls to them hang). A resign on `r1` is given up after 1 s
//! (its future dropped, unconfirmed): its unlocks to lockers 0 and 1 are
//! left on their way on `r1`, not driven after. Call D,
//! `finish_releases(8 s)` on runtime `p`, takes them back and sends them:
//! they time out (5 s) and go back to the queue, and a drain task on `p`
//! sends them again (they hang too). The cut heals and l
//! resigns again on `p`: every locker answers the unlock at once (inline:
//! calm `FaultyLocker`s answer as `ImmediateLocker`s), and the resign is
//! confirmed (no locker holds the uid). Had the resign's unlocks been sent
//! as calls, their landing would have made D's copies moot
//! (`QueueState::landed_if_copied`); answered inline, it does not. Call B,
//! `finish_releases(0)` on `p` right after, reports the two unlocks D saw
//! fail as pending, though copies of them landed.
#![cfg(feature = "testing")]

use crate::common;
use crate::common::release_on_its_way::a_resign_sent_again_leaves_nothing_owed;
use quorum_lock::testing::TestCluster;

const SEED: u64 = 8121;

#[test]
fn finish_releases_counts_no_unlock_a_resign_sent_again_landed_at_once_after_a_call_saw_its_copy_fail(
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let l = common::seeded(cluster.net_lockers(), "l", SEED);
    a_resign_sent_again_leaves_nothing_owed(&cluster, &l, |_| {});
}
