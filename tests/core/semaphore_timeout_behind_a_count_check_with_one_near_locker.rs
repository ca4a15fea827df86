//! Why `Semaphore::acquire_timeout` gives up when the head of the line's
//! count check keeps being refused by a check held elsewhere (one left
//! behind by another acquirer), with every locker up: locker 0 answers at
//! once, lockers 1 and 2 within 100 ms.
//!
//! The rustdoc of `acquire_timeout`: "`Error::Timeout` when the permits
//! (or the line) were held elsewhere, `Error::Quarantined` or
//! `Error::QuorumUnavailable` when the lockers could not grant";
//! docs/guarantees.md ("Why a wait waits"): "`Error::Timeout` only when the
//! lock is held elsewhere [...] `Error::QuorumUnavailable`, naming each
//! unreachable locker and why, otherwise", and "A lock's first round has
//! heard from nobody yet: the operation's round before it, if of the same
//! mode, stands in".
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_semaphore_acquire::CheckHeldElsewhere;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::Error;

const SEED: u64 = 3641;

/// One acquire_timeout of `timeout` against a check held elsewhere.
async fn give_up_after(timeout: Duration) -> Result<(), Error> {
    let cluster = TestCluster::new(3, SEED);
    // One of the flipped digits of 2, which a count-2 check write-locks.
    let held = CheckHeldElsewhere::new(&cluster, SEED).await;
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[1, 2])
        .unwrap();
    let result = held.semaphore().acquire_timeout(timeout).await.map(drop);
    drop(held.left_behind);
    result
}

/// Fails: each attempt at the count asks for the count and the check as
/// the first rounds of new locks, and the operation's round tracked just
/// before the check is the count's read (another mode), so nothing stands
/// in for it; once locker 0 has answered and before lockers 1 and 2 do,
/// it reads "only 1 of 3 lockers reachable" ("no answer yet"), which wins
/// over held elsewhere and over what the previous attempt heard from all
/// three: `QuorumUnavailable` naming lockers 1 and 2.
#[tokio::test(start_paused = true)]
async fn acquire_timeout_behind_a_count_check_held_elsewhere_with_one_near_locker_says_timeout() {
    eprintln!("seed {SEED}");
    let mut wrong = Vec::new();
    // Deadlines 20 ms apart over the first attempts at the count.
    for ms in (250..1500u64).step_by(20) {
        match give_up_after(Duration::from_millis(ms)).await {
            Err(Error::Timeout) => {}
            other => wrong.push((ms, format!("{other:?}"))),
        }
    }
    assert!(
        wrong.is_empty(),
        "every locker is up; only a check held elsewhere refuses, yet {} of 63 \
         deadlines (ms: {:?}) gave another error, the first: {:?}",
        wrong.len(),
        wrong.iter().map(|(ms, _)| *ms).collect::<Vec<_>>(),
        wrong.first()
    );
}
