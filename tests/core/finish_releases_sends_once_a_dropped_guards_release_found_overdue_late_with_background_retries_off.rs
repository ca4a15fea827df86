//! Reproduces a past break: with `Timeouts::release_retry` zero, the release of a guard dropped on a runtime no longer driven, found overdue only once its one-send window had passed, is given up unsent, and `finish_releases` returns Ok while every locker holds the lock.
//!
//! `Timeouts::release_retry`: "Zero turns the background retries off and
//! leaves failed releases to expiry (an unlock never sent yet, such as the
//! release of a guard dropped on a runtime that stopped being driven, is
//! still sent once)". `Dsync::finish_releases` waits "until every release
//! ... handed to the background has finished: ... guards dropped without
//! `unlock()`". docs/guarantees.md, "Any runtime": a release a runtime
//! began and then stopped driving "is recorded on the lockers' queues as on
//! its way; once overdue ..., any other drain task or `finish_releases`
//! sends it again".
//!
//! The window of that one send is fixed when the guard is dropped
//! (`owe_batch`: the batch's deadline plus one more batch deadline), not
//! when the overdue batch is found: a `finish_releases` that comes later
//! than that puts the batch back in the queues already expired, and the
//! drain task gives it up without ever sending it.
//!
//! The scene (real clock, as the guard's runtime must stop being driven):
//! unlock timeout 500 ms (overdue after 1.1 s, one-send window over at
//! 2.2 s), retry window zero. "y" is taken on runtime `idle` and its guard
//! dropped as `block_on` returns, so its unlocks are never sent. The
//! process does other work for 3 s; then, on another runtime,
//! `finish_releases(3 s)`: it should send the unlocks once.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::Timeouts;

const SEED: u64 = 47_002;

#[test]
fn finish_releases_sends_once_a_dropped_guards_release_found_overdue_late_with_background_retries_off(
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

    // Other work before the process winds down: no runtime of this `Dsync`
    // is driven meanwhile (the lease's validity, 60 s by default, is far).
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        common::holding(cluster.lockers(), &uid),
        [true, true, true],
        "the dropped guard's unlocks were never sent"
    );

    let (finished, left) =
        common::finish_elsewhere(&ds, cluster.lockers(), &uid, Duration::from_secs(3));
    assert!(
        !(finished.is_ok() && left.iter().any(|h| *h)),
        "finish_releases returned {finished:?} while the lockers holding y are {left:?}: the \
         dropped guard's release, never sent, was found overdue after its one-send window had \
         passed and given up unsent, background retries being off"
    );
    drop(idle);
}
