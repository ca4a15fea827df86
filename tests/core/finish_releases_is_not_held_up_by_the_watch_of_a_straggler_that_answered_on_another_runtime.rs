//! Reproduces a past break: a guard dropped as its `block_on` returns leaves its straggler watch on that idle runtime; the straggler answers and undoes its grant on the driven acquiring runtime, every locker is free, yet `finish_releases` waits for the idle watch's record until it is overdue and fails with `ReleasesPending`.
//!
//! `Dsync::finish_releases` (rustdoc): "Waits, at most `within`, until
//! every release ... handed to the background has finished ... A watch on
//! a lock call still on its way is left until that call must have ended";
//! "Fails with [`Error::ReleasesPending`] when releases are still running
//! at the bound". docs/guarantees.md, "Any runtime": the watch "is owed like
//! a release ..., recorded on the watched lockers' queues until it ends ...,
//! and ends as soon as the calls settle"; "an acquiring runtime that is
//! idle or gone holds nothing up".
//!
//! The scene (real clock, as a runtime must stop being driven): three
//! lockers; locker 2 applies the lock at once but its reply takes 300 ms.
//! `try_lock` wins with lockers 0 and 1 on a multi-thread runtime
//! `acquiring` that stays driven, so the straggler's call to locker 2 goes
//! on there. The guard is dropped on runtime `idle` as its `block_on`
//! returns; `idle` is kept, never driven again. The straggler answers on
//! `acquiring` and undoes its own grant: nothing is owed any more once
//! `finish_releases(2 s)` (acquire 10 s, unlock 500 ms) runs on a third
//! runtime, and it should return `Ok`.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use quorum_lock::testing::{CallKind, Route, TestCluster};
use quorum_lock::Timeouts;

use crate::common::{self, holding};

const SEED: u64 = 61_001;

#[test]
fn finish_releases_is_not_held_up_by_the_watch_of_a_straggler_that_answered_on_another_runtime() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let lockers = cluster.relayed_lockers(move |i, kind, _| match (i, kind) {
        (2, CallKind::Lock) => Route::SlowReply(Duration::from_millis(300)),
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

    // The straggler answers on `acquiring` (driven by its worker) and undoes
    // its grant on locker 2.
    let started = Instant::now();
    while holding(cluster.lockers(), &uid)[2] {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "control: the straggler undoes its grant on locker 2"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Its undo has ended (the locker took it at once).
    std::thread::sleep(Duration::from_millis(100));

    let began = Instant::now();
    let (finished, left) =
        common::finish_elsewhere(&ds, cluster.lockers(), &uid, Duration::from_secs(2));
    let took = began.elapsed();
    assert!(
        finished.is_ok() && !left.iter().any(|h| *h),
        "the straggler answered and undid its grant on the driven acquiring runtime, and every \
         locker answers, yet finish_releases(2 s) returned {finished:?} after {took:?} with the \
         lockers holding the uid {left:?}: the watch of that straggler, on the idle runtime the \
         guard was dropped on, keeps its record on locker 2's queue until it is overdue \
         (acquire + twice the unlock timeout), though the call it watches has settled"
    );
    drop(idle);
    drop(acquiring);
}
