//! Reproduces a past break: an `unlock()` confirmed by a quorum hands its call to the slow locker to the runtime it ran on; that runtime is then no longer driven, and `finish_releases` on another runtime waits out its bound with the entry left on a locker that answers.
//!
//! docs/guarantees.md, "Any runtime": "Every unlock is owed from the moment
//! its release is planned"; "A release a runtime began and then stopped
//! driving (a guard dropped as its `block_on` returns, the undo of a failed
//! round or a dropped lock future, a retry a drain task was sending) is
//! recorded on the lockers' queues as on its way; once overdue (twice the
//! unlock timeout, and a little), any other drain task or
//! `finish_releases` sends it again", and "an acquiring runtime that is
//! idle or gone holds nothing up". `Dsync::finish_releases` waits "until
//! every release this client ... handed to the background has finished".
//! A dropped guard's release and a failed round's undo are recorded so
//! (`OwedBatch`); the calls an `unlock()` leaves running once a quorum
//! confirmed are handed to the runtime by `CallSet`'s drop, counted only as
//! outstanding, never on the lockers' queues.
//!
//! The scene (real clock, as the runtime must stop being driven): three
//! lockers; locker 2's unlocks reach it 300 ms late, from the caller's
//! runtime. On runtime `idle`, "y" is locked and `unlock()`ed: lockers 0
//! and 1 confirm at once and `unlock()` returns Ok, its call to locker 2
//! on its way; `block_on` returns and `idle` is kept, never driven again.
//! On another runtime `finish_releases(3 s)` (unlock timeout 500 ms:
//! overdue after 1.1 s) should send locker 2 the unlock and return Ok.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{CallKind, Route, TestCluster};
use quorum_lock::Timeouts;

use crate::common::{self, holding};

const SEED: u64 = 47_001;

#[test]
fn finish_releases_sends_an_unlock_handed_to_a_runtime_no_longer_driven_after_a_quorum_confirmed() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let lockers = cluster.relayed_lockers(move |i, kind, _| match (i, kind) {
        (2, CallKind::Unlock) => Route::Late(Duration::from_millis(300)),
        _ => Route::Forward,
    });
    let ds = common::with_timeouts(
        lockers,
        SEED,
        Timeouts {
            unlock: Duration::from_millis(500),
            ..Timeouts::default()
        },
    );

    let idle = crate::common::runtime();
    let uid = idle.block_on(async {
        let guard =
            tokio::time::timeout(Duration::from_secs(5), ds.rw_mutex(["y"]).unwrap().lock())
                .await
                .expect("in time")
                .expect("every locker grants");
        let uid = guard.uid().to_owned();
        assert_eq!(
            holding(cluster.lockers(), &uid),
            [true, true, true],
            "every locker holds the grant"
        );
        let unlocked = tokio::time::timeout(Duration::from_secs(5), guard.unlock())
            .await
            .expect("in time");
        assert!(unlocked.is_ok(), "lockers 0 and 1 confirm: {unlocked:?}");
        uid
    });
    eprintln!(
        "after unlock() returned: lockers holding the uid {:?}",
        holding(cluster.lockers(), &uid)
    );

    let (finished, left) =
        common::finish_elsewhere(&ds, cluster.lockers(), &uid, Duration::from_secs(3));
    assert!(
        finished.is_ok() && !left.iter().any(|h| *h),
        "unlock() was confirmed and every locker answers, yet after finish_releases \
         ({finished:?}) on another runtime locker 2 still holds the entry ({left:?}): the call \
         to it was handed to the idle runtime and never recorded on its queue"
    );
    drop(idle);
}
