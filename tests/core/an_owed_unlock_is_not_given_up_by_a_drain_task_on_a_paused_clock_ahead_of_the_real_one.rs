//! Reproduces a past break: an unlock owed to a refusing locker, queued on a runtime on the real clock that then shut down, was dropped as expired by a drain task that `finish_releases` started on a test runtime whose paused clock had run ahead, so the locker kept the entry after it answered again.
//!
//! docs/guarantees.md, "Why nothing is left on a reachable locker"
//! (src/lock/release.rs): "An unlock that fails is not dropped. It goes to
//! its locker's queue and is retried with backoff until it lands or until
//! the locker must have expired the entry by itself". "Any runtime": "What
//! is queued from a drop inside a runtime is drained on that runtime, on
//! its clock (a test's paused clock too ...)". docs/testing.md: "only what
//! a runtime leaves queued when it shuts down (an unlock still owed) is
//! taken over by a runtime the `Dsync` keeps, on the real clock".
//!
//! The scene: on runtime X (real clock), "x" is taken and unlocked while
//! locker 2 refuses; the unlock returns on the other two, and locker 2's
//! is queued, to be retried until twice the validity (120 s) on the real
//! clock. X shuts down. A test runtime on tokio's paused clock, which has
//! slept an hour, calls `finish_releases`: its drain task takes the whole
//! queue, weighs it on its own clock, finds the retry window long past and
//! drops the unlock. Locker 2 then answers again: nothing sends it the
//! unlock, and it keeps the entry.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Timeouts};

const SEED: u64 = 4305;

#[test]
fn an_owed_unlock_is_not_given_up_by_a_drain_task_on_a_paused_clock_ahead_of_the_real_one() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let nodes = cluster.nodes();
    let ds = Dsync::builder(cluster.net_lockers())
        .owner("a")
        .rng_seed(SEED)
        .timeouts(Timeouts {
            unlock: Duration::from_millis(200),
            ..Timeouts::default()
        })
        .build()
        .expect("valid coordinator");

    let x = common::runtime();
    let uid = x.block_on(async {
        let guard = common::try_lock_x(&ds).await;
        let uid = guard.uid().to_owned();
        nodes[2].set_refuse(true);
        let unlocked = tokio::time::timeout(Duration::from_secs(5), guard.unlock())
            .await
            .expect("the unlock returns in time");
        assert!(unlocked.is_ok(), "two of three confirm: {unlocked:?}");
        // Past the unlock deadline: the refused unlock is queued for retry.
        tokio::time::sleep(Duration::from_millis(400)).await;
        uid
    });
    x.shutdown_timeout(Duration::from_secs(1));
    let queued = Instant::now();
    assert!(
        common::holds(&cluster.lockers()[2], &uid),
        "locker 2 refused the unlock and still holds x"
    );

    // A test runtime on tokio's paused clock, an hour on, waits for the
    // releases while locker 2 still refuses.
    let paused = common::paused_runtime();
    let finished = paused.block_on(async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        ds.finish_releases(Duration::from_secs(1)).await
    });
    eprintln!("finish_releases on the paused runtime: {finished:?}");

    // Locker 2 answers again; the Dsync's own runtime (real clock) should
    // send it the owed unlock within its backoff.
    nodes[2].set_refuse(false);
    let mut left = true;
    for _ in 0..40 {
        left = common::holds(&cluster.lockers()[2], &uid);
        if !left {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let at = queued.elapsed();
    eprintln!("{at:?} after the unlock was queued, locker 2 holds x: {left}");
    assert!(
        at < Duration::from_secs(50),
        "checked long before locker 2 could expire the entry: {at:?}"
    );
    assert!(
        !left,
        "locker 2 answers again, well within the unlock's retry window on the real clock, yet \
         it still holds x {at:?} after the unlock was queued: a drain task on a paused clock \
         an hour ahead dropped it as expired"
    );
}
