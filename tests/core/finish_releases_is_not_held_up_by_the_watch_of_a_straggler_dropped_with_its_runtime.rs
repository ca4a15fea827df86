//! Reproduces a past break: a straggler's lock call dropped as its runtime shuts down queues its unlock, which lands, yet the watch's record stays on the locker's queue (the watch sits on an idle runtime, and only a call that answers ends the record), so `finish_releases` waits for it with nothing owed and fails with `ReleasesPending`.
//!
//! `Dsync::finish_releases` (rustdoc): "Waits, at most `within`, until
//! every release ... handed to the background has finished"; "Fails with
//! [`Error::ReleasesPending`] when releases are still running at the
//! bound". docs/guarantees.md, "Any runtime": "A watch's record ends as the
//! last call it watched settles, on whichever runtime that happens", and
//! "an acquiring runtime that is idle or gone holds nothing up"; a call
//! settles "answered or dropped" (a dropped call "queues its unlock").
//!
//! The scene (real clock, as a runtime must stop being driven): three
//! lockers; locker 2 applies the lock at once but its reply takes 3 s.
//! `try_lock` wins with lockers 0 and 1 on a multi-thread runtime
//! `acquiring`, where the straggler's call to locker 2 goes on. The guard
//! is dropped on runtime `idle` as its `block_on` returns; `idle` is kept,
//! never driven again, with the watch on locker 2. `acquiring` is then shut
//! down: the straggler's call is dropped and queues its unlock, which the
//! `Dsync`'s own runtime sends; locker 2 is free. Nothing is owed any more
//! once `finish_releases(2 s)` (acquire 10 s, unlock 500 ms) runs on a third
//! runtime, and it should return `Ok`.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use quorum_lock::testing::{CallKind, Route, TestCluster};
use quorum_lock::Timeouts;

use crate::common::{self, holding};

const SEED: u64 = 61_003;

#[test]
fn finish_releases_is_not_held_up_by_the_watch_of_a_straggler_dropped_with_its_runtime() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let lockers = cluster.relayed_lockers(move |i, kind, _| match (i, kind) {
        (2, CallKind::Lock) => Route::SlowReply(Duration::from_secs(3)),
        _ => Route::Forward,
    });
    let ds = common::with_timeouts(
        lockers,
        SEED,
        Timeouts {
            acquire: Duration::from_secs(10),
            unlock: Duration::from_millis(500),
            ..Timeouts::default()
        },
    );

    let acquiring = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let guard = acquiring.block_on(common::try_lock(&ds, "y"));
    let uid = guard.uid().to_owned();
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [true, true, true],
        "control: locker 2 applied the grant; its reply is on its way"
    );

    // Dropped as `idle`'s `block_on` returns: its release and its watch on
    // locker 2 sit there, never driven again.
    let idle = common::runtime();
    idle.block_on(async move { drop(guard) });

    // The straggler's call is dropped with its runtime, and queues its
    // unlock; the `Dsync`'s own runtime sends it.
    acquiring.shutdown_timeout(Duration::from_secs(1));
    let started = Instant::now();
    while holding(cluster.lockers(), &uid)[2] {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "control: the dropped straggler's queued unlock frees locker 2"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(100));

    let began = Instant::now();
    let (finished, left) =
        common::finish_elsewhere(&ds, cluster.lockers(), &uid, Duration::from_secs(2));
    let took = began.elapsed();
    assert!(
        finished.is_ok() && !left.iter().any(|h| *h),
        "the straggler's call was dropped with its runtime and its queued unlock landed, and \
         every locker answers, yet finish_releases(2 s) returned {finished:?} after {took:?} \
         with the lockers holding the uid {left:?}: the watch's record, its watch on the idle \
         runtime the guard was dropped on, stays on locker 2's queue until it is overdue \
         (acquire + twice the unlock timeout), though the call it watches was dropped"
    );
    drop(idle);
}
