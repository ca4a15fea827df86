//! Reproduces a past break: lockers that queued the wait and were then found failing by a call asked since (its connection reset) read as holding the lock elsewhere once an older call's later reset took the latest-noted place and a newer call, answered around at once, timed out as the call asked latest; the wait gave up with `Timeout`.
//!
//! docs/guarantees.md ("Why a wait waits"): a locker that gave the wait a
//! place in line "and since then ... was found failing by a call of this
//! client (a connection refused), counts as unreachable, not as holding
//! the lock elsewhere. Only calls asked since the request it answered
//! count ... and the failure of a call asked since counts even when an
//! older call's failure is noted after it."
//! The coordinator keeps two failures per locker: the latest by evidence
//! time and that of the call asked latest (`Coordinator::failed_since`).
//! A failure of a call that is neither (asked between the two) is lost:
//! here the older call's reset holds the first place (asked before the
//! wait, so it does not count), and a newer call's timeout the second
//! (over, since the locker answered a call at once after it was asked,
//! before the middle call's reset).
//!
//! Three lockers; nodes 1 and 2 sit behind a wrapper whose force-unlock
//! of "old" fails at 890 ms after it is asked with its connection reset,
//! of "new" at 780 ms after, and of "lost" never answers. Another client
//! holds "res". The client force-unlocks "old" at 0 ms; waits for "res"
//! at 10 ms (deadline 1500 ms, re-checks every 5 s): all three queue it;
//! force-unlocks "new" at 20 ms and "lost" at 30 ms (deadline 1 s); at
//! 40 ms a try_lock of "other" is answered at once by all three. At
//! 800 ms the "new" calls fail (reset, after the locker's latest answer,
//! of a call asked since the wait); at 890 ms the "old" ones; at 1030 ms
//! the "lost" ones time out. Expected: nodes 1 and 2 out of reach from
//! 800 ms on, and the wait giving up with `QuorumUnavailable`.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::{Error, WaitReason};

use crate::a_wait_for_a_held_lock::{
    gave_up, late_force_unlocks, spawn_force_unlock, status_at, until, Late,
};
use crate::common;

const SEED: u64 = 7_391;

/// The force-unlocks of "old" and "new" fail late, as calls whose
/// connection dropped under them do, and of "lost" never answer.
fn answers(name: &str) -> Option<Late> {
    match name {
        "old" => Some(Late::ResetAfter(Duration::from_millis(890))),
        "new" => Some(Late::ResetAfter(Duration::from_millis(780))),
        "lost" => Some(Late::Never),
        _ => None,
    }
}

#[tokio::test(start_paused = true)]
async fn lock_timeout_with_queueing_lockers_reset_on_a_later_call_beside_an_older_reset_and_a_newer_timeout(
) {
    let (holder, h, start) = late_force_unlocks(SEED, answers);
    let _held = holder.rw_mutex(["res"]).unwrap().lock().await.unwrap();
    let old = spawn_force_unlock(&h, "old");
    until(start, 10).await;
    let mutex = h.rw_mutex(["res"]).unwrap();
    let wait = common::spawn_lock_timeout(&mutex, Duration::from_millis(1_500));
    until(start, 15).await;
    let queued = mutex.waiting();
    until(start, 20).await;
    let new = spawn_force_unlock(&h, "new");
    until(start, 30).await;
    let lost = spawn_force_unlock(&h, "lost");
    until(start, 40).await;
    let tried = h.rw_mutex(["other"]).unwrap().try_lock().await.map(|_g| ());
    eprintln!("try_lock of \"other\" at {:?}: {tried:?}", start.elapsed());
    let reset = status_at(&mutex, start, 850).await;
    let both = status_at(&mutex, start, 950).await;
    let after = status_at(&mutex, start, 1_100).await;
    let result = gave_up(wait, start).await;
    for (name, task) in [("old", old), ("new", new), ("lost", lost)] {
        let out = tokio::time::timeout(Duration::from_secs(5), task).await;
        eprintln!("force_unlock of {name:?}: {out:?}");
    }
    assert_eq!(
        queued.map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere),
        "all three queued the wait"
    );
    assert_eq!(
        reset.map(|s| s.reason()),
        Some(WaitReason::NoQuorum),
        "a call asked at 20 ms, since the wait, failed at 800 ms with its connection reset"
    );
    assert_eq!(
        both.map(|s| s.reason()),
        Some(WaitReason::NoQuorum),
        "an older call failing later too (890 ms) does not hide that"
    );
    assert_eq!(
        after.map(|s| s.reason()),
        Some(WaitReason::NoQuorum),
        "nor does a call asked at 30 ms timing out at 1030 ms; nodes 1 and 2 answered nothing since 40 ms"
    );
    assert!(
        matches!(result, Err(Error::QuorumUnavailable { .. })),
        "one locker of three answers: {result:?}"
    );
}
