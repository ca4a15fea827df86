//! Reproduces a past break: a retry a drain task was sending when its runtime stopped being driven is not sent again at once by `finish_releases`, only once overdue (twice the unlock timeout and 100 ms): with a 1 s unlock timeout, `finish_releases(1 s)` returns `ReleasesPending` and the answering locker keeps the entry (with 3 s it frees it).
//!
//! docs/guarantees.md, "Any runtime": "A release a runtime began and then
//! stopped driving (..., a retry a drain task was sending) is recorded on
//! the lockers' queues as on its way; once overdue (twice the unlock
//! timeout, and a little), any other drain task sends it again, and
//! `finish_releases` sends a release's unlocks again at once, without
//! waiting for them to be overdue". `Dsync::finish_releases`: "A release
//! whose task sits on a runtime that is no longer driven ... is sent again
//! from here, at once".
//!
//! The scene is that of
//! `finish_releases_sends_an_unlock_whose_retry_was_in_flight_when_its_runtime_went_idle`,
//! with a 1 s unlock timeout instead of 200 ms, so that the refused unlock
//! is past `unlock()`'s own retries and in a drain task's hands: that
//! batch (not marked to be hurried) is overdue only 2.1 s after it was
//! taken, and `finish_releases(1 s)` on another runtime gives up before
//! then, though locker 2 answers at once. (The same with the default 5 s
//! unlock timeout holds `finish_releases` for 10.1 s.)
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use crate::common;
use quorum_lock::testing::{CallKind, TestCluster};
use quorum_lock::Timeouts;

const SEED: u64 = 5001;

#[test]
fn finish_releases_sends_at_once_a_retry_in_flight_on_a_runtime_no_longer_driven() {
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

    let idle = common::runtime();
    let uid = idle.block_on(async {
        let guard = common::try_lock(&ds, "y").await;
        let uid = guard.uid().to_owned();
        nodes[2].set_refuse(true);
        let unlocked = tokio::time::timeout(Duration::from_secs(5), guard.unlock())
            .await
            .expect("the unlock returns in time");
        assert!(unlocked.is_ok(), "two of three confirm: {unlocked:?}");
        // Past the unlock's inline retries (1 s): the refused unlock is
        // queued, and its drain task retries it.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // Locker 2 now hangs; drive `idle` only until its drain task has
        // sent the next retry, which is then in flight.
        let seen = nodes[2].stats(CallKind::Unlock).seen;
        nodes[2].set_refuse(false);
        nodes[2].set_hang(true);
        let started = Instant::now();
        while nodes[2].stats(CallKind::Unlock).seen == seen {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the drain task retries within its backoff"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        uid
    });
    assert!(
        common::holds(&cluster.lockers()[2], &uid),
        "locker 2 has not been unlocked yet"
    );
    nodes[2].set_hang(false);

    let (finished, left) =
        common::finish_elsewhere(&ds, cluster.lockers(), &uid, Duration::from_secs(1));
    assert!(
        !left.iter().any(|h| *h) && finished.is_ok(),
        "locker 2 answers again at once, yet after finish_releases(1 s) ({finished:?}) the \
         lockers holding y are {left:?}: the retry held by a drain task on a runtime no longer \
         driven is sent again only once overdue (twice the 1 s unlock timeout), not at once"
    );
    drop(idle);
}
