//! Reproduces a past break: `finish_releases` takes back a dropped guard's release still being sent on a driven runtime, and when both its own send and the release's fail, the one unlock owed is queued twice and counted twice among the releases still running at the bound.
//!
//! `Error::ReleasesPending` (rustdoc): `pending` is "Releases still
//! running". docs/guarantees.md, "Any runtime": `finish_releases` takes a
//! release's unlocks back and sends them itself ("an unlock goes by uid,
//! so one sent twice frees nothing else"); "what it took back and did not
//! see land ... goes back to the queue".
//!
//! The scene, on tokio's paused clock: guard "a" is dropped on the driven
//! runtime, so its release task runs; locker 0 refuses unlocks
//! (connection refused, retryable), lockers 1 and 2 take them.
//! `finish_releases(10 s)` is called at once: it takes the release's
//! batch back and sends it itself; locker 0 refuses, and the call queues
//! its unlock again. The release task, still running, retries locker 0
//! within the unlock timeout (5 s) and then queues the same unlock too.
//! At the bound one unlock is owed (locker 0's of "a"), yet the call
//! reports two: the two copies of one uid in locker 0's queue.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common::release_on_its_way::finish_releases_beside_a_driven_release;
use quorum_lock::Error;

const SEED: u64 = 7601;

#[test]
fn finish_releases_counts_an_unlock_it_took_back_once_though_its_release_queued_it_too() {
    let (finished, left) =
        finish_releases_beside_a_driven_release(SEED, Duration::from_secs(10), |locker, down| {
            locker.unlocks_refused_while(down)
        });
    eprintln!("finish_releases(10 s): {finished:?}; lockers holding a then {left:?}");
    assert_eq!(
        left,
        [true, false, false],
        "control: locker 0, which refuses unlocks, is the only one still holding a"
    );
    let Err(Error::ReleasesPending { pending, .. }) = finished else {
        panic!("control: locker 0's unlock is still owed at the bound, got {finished:?}");
    };
    assert_eq!(
        pending, 1,
        "one unlock (locker 0's of a) is still owed at the bound; the call counts it once for \
         the copy it took back and queued, and once more for the one the release queued"
    );
}
