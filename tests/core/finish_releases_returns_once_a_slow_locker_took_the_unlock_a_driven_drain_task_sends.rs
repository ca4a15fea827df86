//! Reproduces a past break: `finish_releases` takes back, at every look, the batch a drain task on the `Dsync`'s own (driven) runtime is sending to a locker that hung and now answers 200 ms late, so that task sends the same unlock again and again (13 times) and `finish_releases(3 s)` returns `ReleasesPending` though the locker took the unlock at once.
//!
//! `Dsync::finish_releases`: "Fails with `Error::ReleasesPending` when
//! releases are still running at the bound (a lock server is unreachable,
//! say)"; only "a release whose task sits on a runtime that is no longer
//! driven ... is sent again from here". docs/guarantees.md, "No leaks
//! from cancellation or failure": a failed unlock "is retried with
//! backoff until it lands". Here every unlock lands 200 ms after it is
//! sent, yet the batch in flight is copied back into the queue at each of
//! `finish_releases`' looks (every 20 ms): the drain task, which is driven
//! and whose call succeeds, finds the copy and sends it again, for as
//! long as `finish_releases` waits.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use crate::common;
use quorum_lock::testing::{CallKind, Latency, TestCluster};
use quorum_lock::Timeouts;

const SEED: u64 = 5102;

#[test]
fn finish_releases_returns_once_a_slow_locker_took_the_unlock_a_driven_drain_task_sends() {
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
    // The drain task retries the unlock the hanging locker did not answer.
    let started = Instant::now();
    let seen = nodes[2].stats(CallKind::Unlock).seen;
    while nodes[2].stats(CallKind::Unlock).seen < seen + 2 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the drain task retries the unlock"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        common::holds(&cluster.lockers()[2], &uid),
        "control: locker 2 still holds the uid"
    );

    // Locker 2 answers calls again, each 200 ms late (within the 300 ms
    // unlock timeout).
    nodes[2].set_latency(Latency::Fixed(Duration::from_millis(200)));
    nodes[2].set_hang(false);
    let before = nodes[2].stats(CallKind::Unlock).seen;
    let began = Instant::now();
    let finished = common::runtime().block_on(ds.finish_releases(Duration::from_secs(3)));
    let took = began.elapsed();
    let sent = nodes[2].stats(CallKind::Unlock).seen - before;
    let held = common::holds(&cluster.lockers()[2], &uid);
    eprintln!(
        "finish_releases(3 s): {finished:?} after {took:?}; locker 2 was sent {sent} unlocks \
         meanwhile and holds the uid: {held}"
    );
    assert!(!held, "control: locker 2 took the unlock");
    assert!(
        finished.is_ok() && sent <= 3,
        "locker 2 answers every unlock 200 ms late and took the one it was owed, yet \
         finish_releases(3 s) returned {finished:?} after {took:?}, and locker 2 was sent the \
         same unlock {sent} times meanwhile: the batch the Dsync's own drain task sends is \
         copied back into the queue at every look, and sent again and again"
    );
    drop(rt);
}
