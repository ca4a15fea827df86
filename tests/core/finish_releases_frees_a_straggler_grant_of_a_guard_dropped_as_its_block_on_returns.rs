//! Reproduces a past break: a guard dropped as its `block_on` returns, while the won round's call to a slow locker is still on its way on that runtime, leaves that locker's grant in place: the release's watch sits on the same runtime, no longer driven, and `finish_releases` on another runtime waits out its bound.
//!
//! docs/guarantees.md, "Any runtime": "A release a runtime began and then
//! stopped driving (a guard dropped as its `block_on` returns, ...) is
//! recorded on the lockers' queues as on its way; once overdue (twice the
//! unlock timeout, and a little), any other drain task or
//! `finish_releases` sends it again", "a release watches every locker
//! with a lock or wait call on its way ... once it must have ended
//! (`Timeouts::acquire` after it was sent, plus 100 ms) the release's side
//! sends that locker the unlock itself", and "an acquiring runtime that is
//! idle or gone holds nothing up"; "No leaks": dropping a guard "never
//! leaves an entry behind on a reachable locker". The lockers that
//! granted are recorded (`OwedBatch`); the straggler's locker is only
//! watched, by a task spawned on the dropping runtime, counted as
//! outstanding and recorded on no queue.
//!
//! The scene (real clock, as the runtime must stop being driven): three
//! lockers; locker 2 applies the lock at once but its reply takes 300 ms.
//! On runtime `idle`, `try_lock` wins with lockers 0 and 1 and its guard
//! is dropped as `block_on` returns, the call to locker 2 still on its
//! way; `idle` is kept, never driven again. On another runtime
//! `finish_releases(4 s)` (unlock timeout 500 ms, acquire 1 s) should
//! free locker 2 too.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{CallKind, Route, TestCluster};
use quorum_lock::Timeouts;

use crate::common::{self, holding};

const SEED: u64 = 47_003;

#[test]
fn finish_releases_frees_a_straggler_grant_of_a_guard_dropped_as_its_block_on_returns() {
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
            unlock: Duration::from_millis(500),
            ..Timeouts::default()
        },
    );

    let idle = crate::common::runtime();
    let uid = idle.block_on(async {
        let guard = common::try_lock(&ds, "y").await;
        let uid = guard.uid().to_owned();
        assert_eq!(
            holding(cluster.lockers(), &uid),
            [true, true, true],
            "locker 2 applied the grant; its reply is on its way"
        );
        drop(guard);
        uid
    });

    let (finished, left) =
        common::finish_elsewhere(&ds, cluster.lockers(), &uid, Duration::from_secs(4));
    assert!(
        finished.is_ok() && !left.iter().any(|h| *h),
        "the guard was dropped and every locker answers, yet after finish_releases \
         ({finished:?}) on another runtime the lockers holding it are {left:?}: the straggler's \
         grant on locker 2 is watched only from the idle runtime"
    );
    drop(idle);
}
