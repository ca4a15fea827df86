//! A straggler watch left on a runtime that is no longer driven holds
//! `finish_releases` up no longer than the lock call it watches: whether
//! that call answers on the runtime that sent it, or is dropped with it.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use quorum_lock::testing::{CallKind, Route, TestCluster};
use quorum_lock::Timeouts;

use crate::common::{self, holding};

/// Reproduces a past break: a guard dropped as its `block_on` returns leaves its straggler watch on that idle runtime; the straggler answers and undoes its grant on the driven acquiring runtime, every locker is free, yet `finish_releases` waits for the idle watch's record until it is overdue and fails with `ReleasesPending`.
///
/// `Dsync::finish_releases` (rustdoc): "Waits, at most `within`, until
/// every release ... handed to the background has finished ... A watch on
/// a lock call still on its way is left until that call must have ended";
/// "Fails with [`Error::ReleasesPending`] when releases are still running
/// at the bound". docs/guarantees.md, "Any runtime": the watch "is owed like
/// a release ..., recorded on the watched lockers' queues until it ends ...,
/// and ends as soon as the calls settle"; "an acquiring runtime that is
/// idle or gone holds nothing up".
///
/// The scene (real clock, as a runtime must stop being driven): three
/// lockers; locker 2 applies the lock at once but its reply takes 300 ms.
/// `try_lock` wins with lockers 0 and 1 on a multi-thread runtime
/// `acquiring` that stays driven, so the straggler's call to locker 2 goes
/// on there. The guard is dropped on runtime `idle` as its `block_on`
/// returns; `idle` is kept, never driven again. The straggler answers on
/// `acquiring` and undoes its own grant: nothing is owed any more once
/// `finish_releases(2 s)` (acquire 10 s, unlock 500 ms) runs on a third
/// runtime, and it should return `Ok`.
#[test]
fn finish_releases_is_not_held_up_by_the_watch_of_a_straggler_that_answered_on_another_runtime() {
    a_straggler_watched_from_an_idle_runtime(61_001, Settles::Answers);
}

/// Reproduces a past break: a straggler's lock call dropped as its runtime shuts down queues its unlock, which lands, yet the watch's record stays on the locker's queue (the watch sits on an idle runtime, and only a call that answers ends the record), so `finish_releases` waits for it with nothing owed and fails with `ReleasesPending`.
///
/// `Dsync::finish_releases` (rustdoc): "Waits, at most `within`, until
/// every release ... handed to the background has finished"; "Fails with
/// [`Error::ReleasesPending`] when releases are still running at the
/// bound". docs/guarantees.md, "Any runtime": "A watch's record ends as the
/// last call it watched settles, on whichever runtime that happens", and
/// "an acquiring runtime that is idle or gone holds nothing up"; a call
/// settles "answered or dropped" (a dropped call "queues its unlock").
///
/// The scene (real clock, as a runtime must stop being driven): three
/// lockers; locker 2 applies the lock at once but its reply takes 3 s.
/// `try_lock` wins with lockers 0 and 1 on a multi-thread runtime
/// `acquiring`, where the straggler's call to locker 2 goes on. The guard
/// is dropped on runtime `idle` as its `block_on` returns; `idle` is kept,
/// never driven again, with the watch on locker 2. `acquiring` is then shut
/// down: the straggler's call is dropped and queues its unlock, which the
/// `Dsync`'s own runtime sends; locker 2 is free. Nothing is owed any more
/// once `finish_releases(2 s)` (acquire 10 s, unlock 500 ms) runs on a third
/// runtime, and it should return `Ok`.
#[test]
fn finish_releases_is_not_held_up_by_the_watch_of_a_straggler_dropped_with_its_runtime() {
    a_straggler_watched_from_an_idle_runtime(61_003, Settles::DroppedWithItsRuntime);
}

/// How the straggler's lock call to locker 2 settles.
#[derive(Clone, Copy, PartialEq)]
enum Settles {
    /// It answers (300 ms late) on the runtime that sent it, and undoes
    /// its grant there.
    Answers,
    /// Its answer takes 3 s, and its runtime is shut down first: it is
    /// dropped and queues its unlock, which the `Dsync`'s own runtime
    /// sends.
    DroppedWithItsRuntime,
}

/// `try_lock` wins with lockers 0 and 1 on a runtime `acquiring` while
/// locker 2's reply is on its way; the guard is dropped on `idle` as its
/// `block_on` returns (its release and the watch on locker 2 sit there,
/// never driven again); the straggler's call settles as `settles` says,
/// and locker 2 is free. Then `finish_releases(2 s)` on a third runtime
/// must return `Ok` with every locker free.
fn a_straggler_watched_from_an_idle_runtime(seed: u64, settles: Settles) {
    eprintln!("seed {seed}");
    let reply_after = match settles {
        Settles::Answers => Duration::from_millis(300),
        Settles::DroppedWithItsRuntime => Duration::from_secs(3),
    };
    let cluster = TestCluster::new(3, seed);
    let lockers = cluster.relayed_lockers(move |i, kind, _| match (i, kind) {
        (2, CallKind::Lock) => Route::SlowReply(reply_after),
        _ => Route::Forward,
    });
    let ds = common::with_timeouts(
        lockers,
        seed,
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
    let idle = common::runtime();
    idle.block_on(async move { drop(guard) });
    if settles == Settles::DroppedWithItsRuntime {
        acquiring.shutdown_timeout(Duration::from_secs(1));
    }
    let started = Instant::now();
    while holding(cluster.lockers(), &uid)[2] {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "control: the straggler's undo (or its dropped call's queued unlock) frees locker 2"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Its unlock has ended (the locker took it at once).
    std::thread::sleep(Duration::from_millis(100));

    let began = Instant::now();
    let (finished, left) =
        common::finish_elsewhere(&ds, cluster.lockers(), &uid, Duration::from_secs(2));
    let took = began.elapsed();
    assert!(
        finished.is_ok() && !left.iter().any(|h| *h),
        "the straggler's call settled ({}) and locker 2 is free, and every locker answers, yet \
         finish_releases(2 s) returned {finished:?} after {took:?} with the lockers holding the \
         uid {left:?}: the watch's record, its watch on the idle runtime the guard was dropped \
         on, stays on locker 2's queue until it is overdue (acquire + twice the unlock timeout)",
        match settles {
            Settles::Answers => "it answered on the acquiring runtime",
            Settles::DroppedWithItsRuntime => "it was dropped with its runtime",
        }
    );
    drop(idle);
}
