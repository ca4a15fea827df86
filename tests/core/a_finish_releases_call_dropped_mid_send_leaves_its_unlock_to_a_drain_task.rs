//! Reproduces a past break: a `finish_releases` call dropped while it sends an unlock it took back puts that unlock back in its queue with no drain task to send it, so a locker that answers again keeps the entry until it expires.
//!
//! `Dsync::finish_releases` (rustdoc), "Cancel safety": "Cancel safe: it
//! waits, and hands unlocks to drain tasks that go on without it."
//! docs/guarantees.md, "No leaks from cancellation or failure": "Dropping
//! ... a guard never leaves an entry behind on a reachable locker", and
//! "An unlock that fails goes to its locker's retry queue and is retried
//! with backoff until it lands".
//!
//! The scene, on tokio's paused clock: guard "a" is dropped on runtime
//! `r1`, which is not driven again, so its release is a batch on its way.
//! Unlocks to locker 0 take 60 s to arrive. A `finish_releases(10 s)` call
//! on the paused runtime takes the batch back and sends it itself; lockers
//! 1 and 2 take it, and 100 ms in the call is dropped (a `timeout` around
//! it), its send to locker 0 still on its way. Locker 0 is then fast
//! again, and the paused runtime is driven for 10 s more: nobody sends
//! locker 0 the unlock, which sits in the queue with no drain task.
#![cfg(feature = "testing")]

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::hooked::Late;
use crate::common::release_on_its_way::ReleaseOnItsWay;
use crate::common::{self};
use quorum_lock::Timeouts;

const SEED: u64 = 7302;

#[test]
fn a_finish_releases_call_dropped_mid_send_leaves_its_unlock_to_a_drain_task() {
    let scene = ReleaseOnItsWay::with_timeouts(
        SEED,
        Timeouts {
            unlock: Duration::from_millis(300),
            ..Timeouts::default()
        },
        |locker, slow| locker.unlocks_late_while(slow, Late::Arriving, Duration::from_secs(60)),
    );

    let paused = common::paused_runtime();
    let (cut, during, after, later, last) = paused.block_on(async {
        let cut = tokio::time::timeout(
            Duration::from_millis(100),
            scene.ds.finish_releases(Duration::from_secs(10)),
        )
        .await;
        let during = scene.holding();
        scene.slow.store(false, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(10)).await;
        let after = scene.holding();
        // Still queued: a later call finds and sends it.
        let later = scene.ds.finish_releases(Duration::from_secs(2)).await;
        (cut, during, after, later, scene.holding())
    });
    eprintln!(
        "finish_releases cut at 100 ms: {cut:?}; lockers holding a then {during:?}, 10 s later \
         (locker 0 fast again) {after:?}; a later finish_releases: {later:?}, then {last:?}"
    );
    assert!(cut.is_err(), "control: the call was dropped mid-send");
    assert_eq!(
        during,
        [true, false, false],
        "control: the call's send reached lockers 1 and 2, not yet locker 0"
    );
    assert!(
        later.is_ok() && !last[0],
        "control: the unlock is still queued, and a later call sends it"
    );
    assert!(
        !after[0],
        "a finish_releases call dropped mid-send left a's unlock to locker 0 with no drain task: \
         10 s on a driven runtime later, locker 0 (answering at once again) still holds the \
         entry"
    );
}
