//! Reproduces a past break: with `Timeouts::release_retry` zero, the release of a guard dropped on a runtime shut down before its task ran is queued already given up, never sent, and `finish_releases` returns Ok while every locker holds the lock.
//!
//! `Timeouts::release_retry`: "Zero turns the background retries off and
//! leaves failed releases to expiry": it is about *failed* unlocks.
//! docs/guarantees.md, "Any runtime": "Every unlock is owed from the moment
//! its release is planned: a release task that a runtime shut down drops
//! unrun or cuts short queues what it had not done". `Dsync::finish_releases`
//! waits "until every release ... handed to the background has finished:
//! ... guards dropped without `unlock()`".
//!
//! The scene (real clock): "y" is taken on runtime `gone`, its guard
//! dropped there, and `gone` is dropped at once: the release task never
//! ran, and each `Owed` queues its unlock with a retry window that ends as
//! it is queued (`owed_give_up`). `finish_releases` on another runtime
//! sees the drain task give them up without sending any.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::Timeouts;

const SEED: u64 = 4637;

#[test]
fn finish_releases_does_not_report_done_a_dropped_guards_release_never_sent_before_its_runtime_shut_down_with_background_retries_off(
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let ds = common::with_timeouts(
        cluster.net_lockers(),
        SEED,
        Timeouts {
            release_retry: Duration::ZERO,
            ..Timeouts::default()
        },
    );

    let gone = common::runtime();
    let uid = gone.block_on(async {
        let guard = common::try_lock(&ds, "y").await;
        let uid = guard.uid().to_owned();
        drop(guard);
        uid
    });
    drop(gone);

    let (finished, left) =
        common::finish_elsewhere(&ds, cluster.lockers(), &uid, Duration::from_secs(3));
    assert!(
        !(finished.is_ok() && left.iter().any(|h| *h)),
        "finish_releases returned {finished:?} while the lockers holding y are {left:?}: the \
         dropped guard's release never ran, and its owed unlocks were queued already given up"
    );
}
