//! Reproduces a past break: with `Timeouts::release_retry` zero, the release of a guard dropped on a runtime no longer driven is given up unsent once overdue, and `finish_releases` returns Ok while every locker holds the lock.
//!
//! `Timeouts::release_retry`: "Zero turns the background retries off and
//! leaves failed releases to expiry": it is about *failed* unlocks.
//! `Dsync::finish_releases` waits "until every release ... handed to the
//! background has finished: ... guards dropped without `unlock()`".
//! docs/guarantees.md, "Any runtime": a release a runtime began and then
//! stopped driving "is recorded on the lockers' queues as on its way; once
//! overdue ..., any other drain task or `finish_releases` sends it again".
//!
//! The scene (real clock, as the guard's runtime must stop being driven):
//! unlock timeout 500 ms, retry window zero. "y" is taken on runtime `idle`
//! and its guard dropped as `block_on` returns, so its unlocks are never
//! sent. On another runtime `finish_releases` finds the batch overdue after
//! 1.1 s and puts it back in the queues with a retry window that ends the
//! moment it is overdue; the drain task gives it up without sending it.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::Timeouts;

const SEED: u64 = 4517;

#[test]
fn finish_releases_does_not_report_done_a_dropped_guards_release_never_sent_with_background_retries_off(
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let ds = common::with_timeouts(
        cluster.net_lockers(),
        SEED,
        Timeouts {
            unlock: Duration::from_millis(500),
            release_retry: Duration::ZERO,
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
         dropped guard's release was never sent, and was given up as a failed unlock once it \
         was overdue, background retries being off"
    );
    drop(idle);
}
