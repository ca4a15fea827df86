//! Reproduces a past break: an owed unlock taken by a drain task that was in the middle of sending it when its runtime stopped being driven is never sent again: `finish_releases` on another runtime waits out its bound and the answering locker keeps the entry.
//!
//! docs/guarantees.md, "Any runtime": "So an acquiring runtime that is idle
//! or gone holds nothing up", and "One thing waits for a runtime that is no
//! longer driven: the safety margin of a lost lock whose loss was declared
//! there, while its holder still holds the guard." "Why nothing is left on
//! a reachable locker": an unlock that fails "is retried with backoff until
//! it lands or until the locker must have expired the entry by itself".
//! `Dsync::finish_releases`: waits "until every release this client ...
//! handed to the background has finished ... and unlocks being retried".
//!
//! The scene: on runtime `idle` (real clock), "y" is taken and unlocked
//! while locker 2 refuses; its unlock is queued, with a drain task on
//! `idle`. Locker 2 then hangs, and `idle` is driven only until the drain
//! task has sent its retry: the task now holds the unlock (counted as being
//! sent) and is never polled again. Locker 2 answers again. Another runtime
//! calls `finish_releases`: its drain task finds the queue empty, nothing
//! sends locker 2 the unlock, and the call waits its whole bound.
//!
//! Reproduces a past break too: with a 1 s unlock timeout, the refused
//! unlock is past `unlock()`'s own retries and in a drain task's hands;
//! that batch was not marked to be hurried, so `finish_releases` sent it
//! again only once overdue (2.1 s after it was taken, 10.1 s with the
//! default 5 s unlock timeout), not "at once" as docs/guarantees.md ("Any
//! runtime") and `Dsync::finish_releases` say: `finish_releases(1 s)`
//! returned `ReleasesPending` while locker 2 answered.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use crate::common;
use quorum_lock::testing::{CallKind, TestCluster};
use quorum_lock::Timeouts;

/// "y" is taken and unlocked on runtime `idle` while locker 2 refuses,
/// with `unlock` as the unlock timeout; after `queued` the refused unlock
/// is a drain task's, which `idle` drives only until it has sent its next
/// retry to locker 2, now hanging. Locker 2 then answers again, and
/// `finish_releases(within)` on another runtime must free it.
fn a_retry_in_flight_on_an_idle_runtime_is_sent(
    seed: u64,
    unlock: Duration,
    queued: Duration,
    within: Duration,
) {
    eprintln!("seed {seed}");
    let cluster = TestCluster::new(3, seed);
    let nodes = cluster.nodes();
    let ds = common::with_timeouts(
        cluster.net_lockers(),
        seed,
        Timeouts {
            unlock,
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
        // Past the unlock's own retries: the refused unlock is queued, and
        // its drain task retries it.
        tokio::time::sleep(queued).await;
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

    let (finished, left) = common::finish_elsewhere(&ds, cluster.lockers(), &uid, within);
    assert!(
        !left.iter().any(|h| *h) && finished.is_ok(),
        "locker 2 answers again, well within the unlock's retry window, yet after \
         finish_releases({within:?}) ({finished:?}) the lockers holding y are {left:?}: the \
         unlock held by a drain task on a runtime no longer driven is not sent again at once"
    );
    drop(idle);
}

#[test]
fn finish_releases_sends_an_unlock_whose_retry_was_in_flight_when_its_runtime_went_idle() {
    a_retry_in_flight_on_an_idle_runtime_is_sent(
        4401,
        Duration::from_millis(200),
        Duration::from_millis(600),
        Duration::from_secs(2),
    );
}

#[test]
fn finish_releases_sends_at_once_a_retry_in_flight_past_the_unlocks_own_retries() {
    a_retry_in_flight_on_an_idle_runtime_is_sent(
        5001,
        Duration::from_secs(1),
        Duration::from_millis(1500),
        Duration::from_secs(1),
    );
}
