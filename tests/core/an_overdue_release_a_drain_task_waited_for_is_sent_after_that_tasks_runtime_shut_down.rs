//! Reproduces a past break: a drain task that stayed alive only to send another runtime's release once overdue is dropped with its runtime's shutdown, and nobody takes the queue over: the release of a guard dropped as its `block_on` returned is never sent to a locker that answers.
//!
//! docs/guarantees.md, "Any runtime": a release a runtime began and then
//! stopped driving ("a guard dropped as its `block_on` returns") "is
//! recorded on the lockers' queues as on its way; once overdue (twice the
//! unlock timeout, and a little), any other drain task sends it again";
//! "What a drain task held when its runtime was shut down goes back to
//! the queue, and the runtime the `Dsync` keeps takes the queue over,
//! whatever drain tasks other runtimes have (they may be idle and never
//! run again)". "No leaks from cancellation or failure": dropping a guard
//! "never leaves an entry behind on a reachable locker". src/lock/drain.rs:
//! "Another task's batch still on its way keeps this one going: if that
//! task stops being driven, this one sends the batch once it is overdue."
//!
//! The scene (real clock, as runtimes must stop being driven; unlock
//! timeout 1 s, so a recorded release is overdue after 2.1 s): "a" and "b"
//! are taken on runtime `draining`. Locker 2 refuses connections while
//! "a"'s guard is dropped there, so locker 2's queue gets a drain task on
//! `draining`. "b"'s guard is dropped on runtime `idle` as its `block_on`
//! returns: its release is recorded on the queues, never run. Locker 2
//! answers again; `draining`'s drain task delivers "a"'s unlock and goes on
//! for "b"'s record, still on its way. Then `draining` is shut down, before
//! that record is overdue. Locker 2 should still be sent "b"'s unlock once
//! it is overdue; it keeps the entry.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use quorum_lock::testing::TestCluster;
use quorum_lock::Timeouts;

use crate::common::{self, holding, holds};

const SEED: u64 = 61_003;

#[test]
fn an_overdue_release_a_drain_task_waited_for_is_sent_after_that_tasks_runtime_shut_down() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let nodes = cluster.nodes();
    let ds = common::with_timeouts(
        cluster.net_lockers(),
        SEED,
        Timeouts {
            unlock: Duration::from_secs(1),
            ..Timeouts::default()
        },
    );

    let draining = common::runtime();
    let (a, b) = draining.block_on(async {
        (
            common::try_lock(&ds, "a").await,
            common::try_lock(&ds, "b").await,
        )
    });
    let (uid_a, uid_b) = (a.uid().to_owned(), b.uid().to_owned());

    // "a" dropped on `draining` while locker 2 refuses connections: its
    // unlock there is retried inline for the unlock timeout, then queued,
    // with a drain task on `draining`.
    nodes[2].set_refuse(true);
    draining.block_on(async {
        drop(a);
        tokio::time::sleep(Duration::from_millis(1500)).await;
    });
    assert!(
        holds(&cluster.lockers()[2], &uid_a),
        "control: locker 2 still holds a"
    );

    // "b" dropped as `idle`'s `block_on` returns: recorded, never run.
    let idle = common::runtime();
    let dropped = Instant::now();
    idle.block_on(async move { drop(b) });

    // Locker 2 answers again; `draining`'s drain task delivers "a".
    nodes[2].set_refuse(false);
    draining.block_on(async {
        let started = Instant::now();
        while holds(&cluster.lockers()[2], &uid_a) {
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "control: the drain task delivers a's unlock to locker 2"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    assert!(
        dropped.elapsed() < Duration::from_millis(1800),
        "control: b's record is not overdue yet ({:?} since b was dropped)",
        dropped.elapsed()
    );
    assert_eq!(
        holding(cluster.lockers(), &uid_b),
        [true, true, true],
        "control: b's release was never run"
    );

    // `draining` shuts down, its drain task with it, before b's record is
    // overdue.
    drop(draining);
    std::thread::sleep(Duration::from_secs(4));
    let left = holding(cluster.lockers(), &uid_b);
    eprintln!(
        "{:?} after b was dropped, the lockers holding b: {left:?}",
        dropped.elapsed()
    );
    assert!(
        !left[2],
        "locker 2 answers, and b's release was overdue on its queue for about 2 s, yet locker \
         2 still holds b ({left:?}): the drain task that was kept going to send that record \
         once overdue went with its runtime's shutdown, holding no batch of its own, and no \
         drain task took the queue over"
    );
    drop(idle);
}
