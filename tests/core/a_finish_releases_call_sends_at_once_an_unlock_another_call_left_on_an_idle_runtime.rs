//! Reproduces a past break: a `finish_releases` call passes over an unlock stuck on a runtime no longer driven because another `finish_releases` call, still alive on that idle runtime, took it there; it waits for the batch to be overdue and fails with `ReleasesPending`.
//!
//! `Dsync::finish_releases` (rustdoc): "A release whose task sits on a
//! runtime that is no longer driven (a guard dropped as its `block_on`
//! returned) is sent again from here, at once". docs/guarantees.md, "Any
//! runtime": a release a runtime began and then stopped driving ("a retry
//! a drain task was sending" among them) is recorded as on its way, and
//! "`finish_releases` sends a release's unlocks again at once, without
//! waiting for them to be overdue".
//!
//! The scene (real clock, as runtimes must stop being driven): unlock
//! timeout 2 s (a batch is overdue after 4 s and a little). "y" is taken on
//! runtime `dropped_on` and its guard dropped as `block_on` returns. On
//! runtime `idle`, a task calls `finish_releases(30 s)` while locker 2
//! hangs: it hurries the batches, and `idle`'s drain task takes locker 2's
//! copy and sends it; then `idle` stops being driven, the task and its call
//! still alive. Locker 2 answers again. `finish_releases(1 s)` on a third
//! runtime should send locker 2 its unlock at once; it passes over the
//! batch, made of copies a running call took.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use crate::common;
use quorum_lock::testing::{CallKind, TestCluster};
use quorum_lock::Timeouts;

#[test]
fn a_finish_releases_call_sends_at_once_an_unlock_another_call_left_on_an_idle_runtime() {
    let seed = 5407;
    eprintln!("seed {seed}");
    let cluster = TestCluster::new(3, seed);
    let ds = common::with_timeouts(
        cluster.net_lockers(),
        seed,
        Timeouts {
            unlock: Duration::from_secs(2),
            ..Timeouts::default()
        },
    );
    let nodes = cluster.nodes();

    let dropped_on = common::runtime();
    let uid = dropped_on.block_on(async {
        let guard = common::try_lock(&ds, "y").await;
        let uid = guard.uid().to_owned();
        drop(guard);
        uid
    });
    assert_eq!(
        common::holding(cluster.lockers(), &uid),
        [true, true, true],
        "control: the dropped guard's unlocks were never sent"
    );

    // A call on `idle` takes the batches and sends them; locker 2 hangs.
    nodes[2].set_hang(true);
    let seen = nodes[2].stats(CallKind::Unlock).seen;
    let idle = common::runtime();
    let first = {
        let ds = ds.clone();
        idle.spawn(async move { ds.finish_releases(Duration::from_secs(30)).await })
    };
    idle.block_on(async {
        let started = Instant::now();
        while nodes[2].stats(CallKind::Unlock).seen < seen + 1 {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the first call sends locker 2 its unlock"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    assert!(!first.is_finished(), "control: the first call still waits");
    assert!(
        common::holds(&cluster.lockers()[2], &uid),
        "control: locker 2 still holds the uid"
    );

    // `idle` is no longer driven; locker 2 answers again.
    nodes[2].set_hang(false);
    let began = Instant::now();
    let (finished, left) =
        common::finish_elsewhere(&ds, cluster.lockers(), &uid, Duration::from_secs(1));
    let took = began.elapsed();
    assert!(
        finished.is_ok() && left == [false, false, false],
        "locker 2 answers, yet finish_releases(1 s) returned {finished:?} after {took:?} with \
         the lockers holding y {left:?}: the unlock sits with a drain task on a runtime no \
         longer driven, taken there by a finish_releases call still alive on it, and the \
         second call passes over it until it is overdue instead of sending it at once"
    );
    drop(first);
    drop(idle);
    drop(dropped_on);
}
