//! Reproduces a past break: `finish_releases` counts among the pending an unlock that a resign sent again landed at once, when a call saw its copy fail and the batch it copied it from has ended since.
//!
//! docs/guarantees.md, "Any runtime": "A copy the call took back and saw
//! fail is moot, as its own landings make the others, when the release
//! itself (or a drain task) lands a copy of the same unlock".
//! `Error::ReleasesPending` (rustdoc): `pending` is "Releases still
//! running".
//!
//! The scene, on tokio's paused clocks, with `Timeouts::release_retry` of
//! 1 s: l leads election "e" (campaigned on runtime `r1`) on three
//! lockers; lockers 0 and 1 are then cut off from l (calls to them hang).
//! A resign on `r1` is given up after 1 s: its unlocks to lockers 0 and 1
//! are left on their way on `r1`. Call D, `finish_releases(8 s)` on
//! runtime `p`, takes them back and sends them: they time out and go back
//! to the queue. `r1` is then driven until the resign's own calls time
//! out (their retries are past the 1 s window: left to expiry, counted by
//! nobody), which ends the batch D copied from, and with it the record
//! that D took copies of the uid (`QueueState::copied`). The cut heals and
//! l resigns again on `p`: every locker answers the unlock at once, and no
//! locker holds anything. `release::unlock_landed` only makes D's copies
//! moot while that record stands (`landed_if_copied`), so call B,
//! `finish_releases(0)` on `p` right after, reports the two copies D saw
//! fail as pending, though the unlock landed on both lockers.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Error, Timeouts};

const SEED: u64 = 8321;

#[test]
fn finish_releases_counts_no_unlock_a_resign_sent_again_landed_at_once_after_the_batch_a_call_copied_ended(
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let l = Dsync::builder(cluster.net_lockers())
        .owner("l")
        .rng_seed(SEED)
        .timeouts(Timeouts {
            release_retry: Duration::from_secs(1),
            ..Timeouts::default()
        })
        .build()
        .expect("valid coordinator");
    let r1 = common::paused_runtime();
    let (mut leading, first) = r1.block_on(async {
        let mut leading = tokio::time::timeout(
            Duration::from_secs(5),
            l.election("e").unwrap().campaign(b"l".to_vec()),
        )
        .await
        .expect("in time")
        .expect("l leads");
        cluster.partition("l", &[0, 1]).unwrap();
        // Given up after 1 s: its unlocks to lockers 0 and 1 are left on
        // their way on r1.
        let first = tokio::time::timeout(Duration::from_secs(1), leading.resign()).await;
        (leading, first.is_err())
    });
    let p = common::paused_runtime();
    let d = p.block_on(l.finish_releases(Duration::from_secs(8)));
    // The resign's own calls time out (5 s after it began): its retries
    // are past their window, and its batch on its way ends.
    r1.block_on(async { tokio::time::sleep(Duration::from_millis(4_001)).await });
    cluster.heal_partition("l", &[0, 1]).unwrap();
    let (second, entries, b) = p.block_on(async {
        let second = tokio::time::timeout(Duration::from_secs(30), leading.resign())
            .await
            .expect("in time");
        let entries = cluster.total_entries();
        let b = l.finish_releases(Duration::ZERO).await;
        (second, entries, b)
    });
    eprintln!(
        "first resign given up: {first}; D gave {d:?}; second resign {second:?}; entries left \
         {entries}; B gave {b:?}"
    );
    assert!(
        first,
        "control: the first resign was still waiting after 1 s"
    );
    assert!(
        matches!(d, Err(Error::ReleasesPending { .. })),
        "control: D's copies to lockers 0 and 1 failed"
    );
    assert!(
        second.is_ok(),
        "control: every locker confirmed the second resign"
    );
    assert_eq!(entries, 0, "control: no locker holds anything");
    assert!(
        matches!(b, Ok(()) | Err(Error::ReleasesPending { pending: 0, .. })),
        "nothing is owed (the resign sent again landed on every locker, so the copies D saw \
         fail are moot), yet B returned {b:?}"
    );
    drop(leading);
    drop(r1);
}
