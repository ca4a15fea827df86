//! Reproduces a past break: `finish_releases` counts among the pending unlocks that a resign sent again landed at once (answered inline by calm lockers), because an earlier call took copies back and saw them fail.
//!
//! `Error::ReleasesPending` (rustdoc): `pending` is "Releases still
//! running". docs/guarantees.md, "Any runtime": "A copy the call took back
//! and saw fail is moot, as its own landings make the others, when the
//! release itself (or a drain task) lands a copy of the same unlock".
//!
//! The scene, on tokio's paused clocks: l leads election "e" (campaigned
//! on runtime `r1`) on three lockers; lockers 0 and 1 are then cut off
//! from l (calls to them hang). A resign on `r1` is given up after 1 s
//! (its future dropped, unconfirmed): its unlocks to lockers 0 and 1 are
//! left on their way on `r1`, not driven after. Call D,
//! `finish_releases(8 s)` on runtime `p`, takes them back and sends them:
//! they time out (5 s) and go back to the queue, and a drain task on `p`
//! sends them again (they hang too). The cut heals and l
//! resigns again on `p`: every locker answers the unlock at once (inline:
//! calm `FaultyLocker`s answer as `ImmediateLocker`s), and the resign is
//! confirmed (no locker holds the uid). Had the resign's unlocks been sent
//! as calls, their landing would have made D's copies moot
//! (`QueueState::landed_if_copied`); answered inline, it does not. Call B,
//! `finish_releases(0)` on `p` right after, reports the two unlocks D saw
//! fail as pending, though copies of them landed.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::Error;

const SEED: u64 = 8121;

#[test]
fn finish_releases_counts_no_unlock_a_resign_sent_again_landed_at_once_after_a_call_saw_its_copy_fail(
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let l = common::seeded(cluster.net_lockers(), "l", SEED);
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
