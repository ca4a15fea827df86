//! Reproduces a past break: lockers that queued the wait and were then found failing by a call asked since (its connection reset) read as holding the lock elsewhere when nine older calls failed in the same reset just after it, pushing it out of the eight failures kept per locker; the wait gave up with `Timeout`.
//!
//! docs/guarantees.md ("Why a wait waits"): a locker that gave the wait a
//! place in line "and since then ... was found failing by a call of this
//! client (a connection refused), counts as unreachable, not as holding
//! the lock elsewhere ... the failure of a call asked since counts even
//! when an older call's failure is noted after it." The docs set no bound
//! on how many; the coordinator keeps the latest eight failures per locker
//! beside the latest by evidence time (here an older call's reset, noted
//! last at the same instant).
//!
//! Three lockers; nodes 1 and 2 sit behind a wrapper that fails every
//! force-unlock at 900 ms with its connection reset, as a dropped
//! connection fails every call on its way (the calls asked before the
//! wait noted a moment after the one asked since). Another client holds
//! "res". The client force-unlocks "old0".."old8" at 0 ms, waits for "res"
//! at 10 ms (deadline 1500 ms, re-checks every 5 s: all three queue it),
//! force-unlocks "new" at 20 ms. Expected from 900 ms on: nodes 1 and 2
//! out of reach, and the wait giving up with `QuorumUnavailable`.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::{Error, WaitReason};

use crate::a_wait_for_a_held_lock::{
    gave_up, late_force_unlocks, spawn_force_unlock, status_at, until, Late,
};
use crate::common;

const SEED: u64 = 7_391;

/// Every force-unlock of "old…" or "new" fails at 900 ms with its
/// connection reset, as every call on a dropped connection does: the older
/// ones asked before the wait, "new" asked since; the older calls'
/// failures are noted after the newer one's.
fn answers(name: &str) -> Option<Late> {
    let at = Duration::from_millis(900);
    if name.starts_with("old") {
        Some(Late::ResetAt { at, behind: true })
    } else if name == "new" {
        Some(Late::ResetAt { at, behind: false })
    } else {
        None
    }
}

#[tokio::test(start_paused = true)]
async fn lock_timeout_with_queueing_lockers_reset_on_a_later_call_beside_nine_older_resets() {
    let (holder, h, start) = late_force_unlocks(SEED, answers);
    let _held = holder.rw_mutex(["res"]).unwrap().lock().await.unwrap();
    let mut admins: Vec<_> = (0..9)
        .map(|i| spawn_force_unlock(&h, &format!("old{i}")))
        .collect();
    until(start, 10).await;
    let mutex = h.rw_mutex(["res"]).unwrap();
    let wait = common::spawn_lock_timeout(&mutex, Duration::from_millis(1_500));
    until(start, 15).await;
    let queued = mutex.waiting();
    until(start, 20).await;
    admins.push(spawn_force_unlock(&h, "new"));
    let reset = status_at(&mutex, start, 950).await;
    let result = gave_up(wait, start).await;
    for task in admins {
        let out = tokio::time::timeout(Duration::from_secs(5), task).await;
        eprintln!("force_unlock: {out:?}");
    }
    assert_eq!(
        queued.map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere),
        "all three queued the wait"
    );
    assert_eq!(
        reset.map(|s| s.reason()),
        Some(WaitReason::NoQuorum),
        "a call asked at 20 ms, since the wait, failed at 900 ms with its connection reset, \
         whatever older calls failed beside it"
    );
    assert!(
        matches!(result, Err(Error::QuorumUnavailable { .. })),
        "one locker of three answers: {result:?}"
    );
}
