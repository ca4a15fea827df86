//! Reproduces a past break: `finish_releases` reaching its bound while one of its own sends hangs counts the unlocks it sent that landed at once among the releases still running.
//!
//! `Error::ReleasesPending` (rustdoc): `pending` is "Releases still
//! running". docs/guarantees.md, "Any runtime": `finish_releases` takes a
//! release's unlocks back and sends them itself; "what it took back and
//! did not see land ... goes back to the queue"; "what it saw land makes
//! its other copies ... moot".
//!
//! The scene, on tokio's paused clock: guard "a" is dropped on runtime
//! `r1`, which is not driven again, so its release is a batch on its way.
//! Locker 0 takes unlocks 60 s late (on their way to it); lockers 1 and 2
//! answer at once. `finish_releases(3 s)` takes the batch back and sends
//! it itself: the unlocks to lockers 1 and 2 land at 0 s, locker 0's is
//! still on its way at the bound. One release is still running (locker
//! 0's), yet the call reports three: it learns its sends' outcomes only
//! once all of them end, so at its bound the two that landed go back to
//! the queue as if they had not, and are counted.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common::hooked::Late;
use crate::common::release_on_its_way::ReleaseOnItsWay;
use crate::common::{self};
use quorum_lock::Error;

const SEED: u64 = 7512;

#[test]
fn finish_releases_counts_no_unlock_it_saw_land_among_the_pending_at_its_bound() {
    let scene = ReleaseOnItsWay::new(SEED, |locker, slow| {
        locker.unlocks_late_while(slow, Late::Arriving, Duration::from_secs(60))
    });

    let paused = common::paused_runtime();
    let (finished, left) = paused.block_on(async {
        let finished = scene.ds.finish_releases(Duration::from_secs(3)).await;
        (finished, scene.holding())
    });
    eprintln!("finish_releases(3 s): {finished:?}; lockers holding a then {left:?}");
    assert_eq!(
        left,
        [true, false, false],
        "control: the unlocks to lockers 1 and 2 landed, locker 0's did not"
    );
    let Err(Error::ReleasesPending { pending, .. }) = finished else {
        panic!("control: locker 0's unlock is still on its way at the bound, got {finished:?}");
    };
    assert_eq!(
        pending, 1,
        "one unlock (locker 0's) is still running at the bound; the two the call saw land on \
         lockers 1 and 2 are counted too"
    );
}
