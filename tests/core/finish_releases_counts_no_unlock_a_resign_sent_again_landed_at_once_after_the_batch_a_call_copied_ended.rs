//! Reproduces a past break: `finish_releases` counts among the pending an unlock that a resign sent again landed at once, when a call saw its copy fail and the batch it copied it from has ended since.
//!
//! docs/guarantees.md, "Any runtime": "A copy the call took back and saw
//! fail is moot, as its own landings make the others, when the release
//! itself (or a drain task) lands a copy of the same unlock".
//! `Error::ReleasesPending` (rustdoc): `pending` is "Releases still
//! running".
//!
//! The scene, on tokio's paused clocks, with `Timeouts::release_retry` of
//! 1 s: l leads election "e" (campaigned on runtime `r1`) on three
//! lockers; lockers 0 and 1 are then cut off from l (calls to them hang).
//! A resign on `r1` is given up after 1 s: its unlocks to lockers 0 and 1
//! are left on their way on `r1`. Call D, `finish_releases(8 s)` on
//! runtime `p`, takes them back and sends them: they time out and go back
//! to the queue. `r1` is then driven until the resign's own calls time
//! out (their retries are past the 1 s window: left to expiry, counted by
//! nobody), which ends the batch D copied from, and with it the record
//! that D took copies of the uid (`QueueState::copied`). The cut heals and
//! l resigns again on `p`: every locker answers the unlock at once, and no
//! locker holds anything. `release::unlock_landed` only makes D's copies
//! moot while that record stands (`landed_if_copied`), so call B,
//! `finish_releases(0)` on `p` right after, reports the two copies D saw
//! fail as pending, though the unlock landed on both lockers.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common::release_on_its_way::a_resign_sent_again_leaves_nothing_owed;
use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Timeouts};

const SEED: u64 = 8321;

#[test]
fn finish_releases_counts_no_unlock_a_resign_sent_again_landed_at_once_after_the_batch_a_call_copied_ended(
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let l = Dsync::builder(cluster.net_lockers())
        .owner("l")
        .rng_seed(SEED)
        .timeouts(Timeouts {
            release_retry: Duration::from_secs(1),
            ..Timeouts::default()
        })
        .build()
        .expect("valid coordinator");
    a_resign_sent_again_leaves_nothing_owed(&cluster, &l, |r1| {
        // The resign's own calls time out (5 s after it began): its
        // retries are past their window, and its batch on its way ends.
        r1.block_on(async { tokio::time::sleep(Duration::from_millis(4_001)).await });
    });
}
