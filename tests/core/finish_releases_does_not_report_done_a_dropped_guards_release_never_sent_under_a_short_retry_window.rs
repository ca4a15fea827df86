//! Reproduces a past break: under a `Timeouts::release_retry` shorter than twice the unlock timeout, the release of a guard dropped on a runtime no longer driven is given up unsent once overdue, and `finish_releases` returns Ok while every locker holds the lock.
//!
//! `Dsync::finish_releases`: waits "until every release this client ...
//! handed to the background has finished: ... guards dropped without
//! `unlock()`", and fails with `Error::ReleasesPending` "when releases are
//! still running at the bound". docs/guarantees.md, "Any runtime": a
//! release a runtime began and then stopped driving "is recorded on the
//! lockers' queues as on its way; once overdue ..., any other drain task or
//! `finish_releases` sends it again". `Timeouts::release_retry` caps how
//! long *failed* unlocks are retried; this one was never sent.
//!
//! The scene (real clock, as the guard's runtime must stop being driven):
//! unlock timeout 500 ms, retry window 200 ms. "y" is taken on runtime
//! `idle` and its guard dropped as `block_on` returns. On another runtime
//! `finish_releases` finds the batch overdue after 1.1 s, puts it back in
//! the queues with its retry window (counted from the drop) long over, and
//! the drain task gives it up without sending it: Ok, and all three
//! lockers still hold y.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::Timeouts;

const SEED: u64 = 4503;

#[test]
fn finish_releases_does_not_report_done_a_dropped_guards_release_never_sent_under_a_short_retry_window(
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let ds = common::with_timeouts(
        cluster.net_lockers(),
        SEED,
        Timeouts {
            unlock: Duration::from_millis(500),
            release_retry: Duration::from_millis(200),
            ..Timeouts::default()
        },
    );

    let idle = common::runtime();
    let uid = idle.block_on(async {
        let guard = common::try_lock(&ds, "y").await;
        let uid = guard.uid().to_owned();
        drop(guard);
        uid
    });

    let (finished, left) =
        common::finish_elsewhere(&ds, cluster.lockers(), &uid, Duration::from_secs(3));
    assert!(
        !(finished.is_ok() && left.iter().any(|h| *h)),
        "finish_releases returned {finished:?} while the lockers holding y are {left:?}: the \
         dropped guard's release was never sent, and was given up as a failed unlock past its \
         retry window once it was overdue"
    );
    drop(idle);
}
