//! Reproduces a past break: `finish_releases` takes back, at every look, the batch a drain task on another runtime that is still driven (the `Dsync`'s own) is sending to a hanging locker, so the owed unlock is copied again each backoff step (2, 4, 8, ... copies) and sent that many times once the locker answers.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": "The queue probes a failing locker with
//! one unlock per backoff step, however many it owes", and an unlock is
//! owed until it lands; `Dsync::finish_releases` sends again at once only
//! "a release whose task sits on a runtime that is no longer driven".
//! Here the drain task sits on the `Dsync`'s own runtime, which is always
//! driven: each time it takes its batch, `finish_releases` (on another
//! runtime) puts a copy back in the queue, and the drain task's failed
//! batch is added beside it.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use crate::common;
use quorum_lock::testing::{CallKind, TestCluster};
use quorum_lock::Timeouts;

const SEED: u64 = 5101;

#[test]
fn finish_releases_does_not_multiply_a_retry_a_driven_drain_task_is_sending() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let nodes = cluster.nodes();
    let ds = common::with_timeouts(
        cluster.net_lockers(),
        SEED,
        Timeouts {
            unlock: Duration::from_millis(300),
            ..Timeouts::default()
        },
    );

    let rt = common::runtime();
    let uid = rt.block_on(async {
        let guard = common::try_lock(&ds, "y").await;
        let uid = guard.uid().to_owned();
        nodes[2].set_hang(true);
        // Outside any runtime: the release, and the drain task of locker
        // 2's queue, run on the `Dsync`'s own runtime.
        let unlocked = common::unlock_on_a_plain_thread(guard).await;
        assert!(unlocked.is_ok(), "two of three confirm: {unlocked:?}");
        uid
    });
    // Let the drain task take the owed unlock and probe the hanging locker.
    let started = Instant::now();
    let seen = nodes[2].stats(CallKind::Unlock).seen;
    while nodes[2].stats(CallKind::Unlock).seen < seen + 2 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the drain task retries the unlock"
        );
        std::thread::sleep(Duration::from_millis(5));
    }

    let during = nodes[2].stats(CallKind::Unlock).seen;
    let finished = common::runtime().block_on(ds.finish_releases(Duration::from_secs(4)));
    let sent_during = nodes[2].stats(CallKind::Unlock).seen - during;
    eprintln!("finish_releases(4 s) with locker 2 hanging: {finished:?}; unlocks it was sent meanwhile: {sent_during}");
    assert!(finished.is_err(), "locker 2 still holds the uid");

    // Locker 2 answers again: the one unlock it is owed lands.
    let before = nodes[2].stats(CallKind::Unlock).seen;
    nodes[2].set_hang(false);
    let started = Instant::now();
    while common::holds(&cluster.lockers()[2], &uid) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the drain task frees locker 2 once it answers"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Whatever else is on its way lands too.
    std::thread::sleep(Duration::from_secs(2));
    let after = nodes[2].stats(CallKind::Unlock).seen - before;
    eprintln!("unlocks locker 2 was sent once it answered: {after}");
    assert!(
        after <= 3,
        "locker 2, owed one unlock, was sent it {after} times once it answered (and \
         {sent_during} times in the 4 s finish_releases waited): finish_releases copied back \
         into the queue, at every look, the batch the Dsync's own (driven) drain task was \
         sending, beside the copy that task puts back when its call fails"
    );
    drop(rt);
}
