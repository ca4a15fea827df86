//! Reproduces a past break: lockers that queued the wait and then left a call asked since unanswered until it timed out read as holding the lock elsewhere again once it timed out, because an older call to them (asked before they queued the wait) had failed later with its connection reset, and that failure's later time kept the timeout out of the record; the wait gave up with `Timeout`.
//!
//! docs/guarantees.md ("Why a wait waits"): a locker that gave the wait a
//! place in line "and since then has left a call unanswered that long ...
//! counts as unreachable, not as holding the lock elsewhere. Only calls
//! asked since the request it answered count, for silence and for
//! failures alike: an older call of another lock, slow, lost or timing
//! out later, is no news of a locker that answered a later one."
//! The coordinator keeps one failure per locker and replaces it only by
//! one with a later evidence time; a call that failed with its connection
//! reset speaks from when the reset was seen, a call that timed out from
//! when it was asked. An older call (asked before the wait) whose
//! connection was reset late therefore outranks the timeout of a call
//! asked after the wait, and `gone_since` then drops the kept failure as
//! older than the wait: neither counts.
//!
//! Three in-process lockers; nodes 1 and 2 sit behind a wrapper whose
//! force-unlock of "reset" fails after 800 ms with its connection reset
//! (as a remote locker's does when the connection drops under the call),
//! and whose force-unlock of "lost" never answers. Another client holds
//! "res". At 0 ms the client force-unlocks "reset"; at 10 ms it waits for
//! "res" (deadline 1500 ms, re-checks every 5 s): all three queue it. At
//! 20 ms it force-unlocks "lost" (deadline 1 s). At 800 ms the "reset"
//! calls fail; at 1020 ms the "lost" calls time out. Nodes 1 and 2 have
//! answered nothing since 10 ms, and left a call asked at 20 ms
//! unanswered: at 1100 ms `waiting()` says `HeldElsewhere`, and the wait
//! gives up with `Timeout`.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::{Error, WaitReason};

use crate::a_wait_for_a_held_lock::{
    gave_up, late_force_unlocks, spawn_force_unlock, status_at, until, Late,
};
use crate::common;

const SEED: u64 = 7_331;

/// The force-unlock of "reset" fails late, as a call whose connection
/// dropped under it does, and of "lost" never answers.
fn answers(name: &str) -> Option<Late> {
    match name {
        "reset" => Some(Late::ResetAfter(Duration::from_millis(800))),
        "lost" => Some(Late::Never),
        _ => None,
    }
}

#[tokio::test(start_paused = true)]
async fn lock_timeout_with_queueing_lockers_silent_on_a_later_call_beside_an_older_call_reset_late()
{
    let (holder, h, start) = late_force_unlocks(SEED, answers);
    let _held = holder.rw_mutex(["res"]).unwrap().lock().await.unwrap();
    let reset = spawn_force_unlock(&h, "reset");
    until(start, 10).await;
    let mutex = h.rw_mutex(["res"]).unwrap();
    let wait = common::spawn_lock_timeout(&mutex, Duration::from_millis(1_500));
    until(start, 15).await;
    let queued = mutex.waiting();
    until(start, 20).await;
    let lost = spawn_force_unlock(&h, "lost");
    let silent = status_at(&mutex, start, 900).await;
    let after = status_at(&mutex, start, 1_100).await;
    let result = gave_up(wait, start).await;
    let reset = tokio::time::timeout(Duration::from_secs(5), reset).await;
    let lost = tokio::time::timeout(Duration::from_secs(5), lost).await;
    eprintln!("force_unlock of \"reset\": {reset:?}; of \"lost\": {lost:?}");
    assert_eq!(
        queued.map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere),
        "all three queued the wait"
    );
    assert_eq!(
        silent.map(|s| s.reason()),
        Some(WaitReason::NoQuorum),
        "nodes 1 and 2 have left a call asked at 20 ms unanswered for 880 ms"
    );
    assert_eq!(
        after.map(|s| s.reason()),
        Some(WaitReason::NoQuorum),
        "that call timed out at 1020 ms, and nodes 1 and 2 have answered nothing since they queued the wait"
    );
    assert!(
        matches!(result, Err(Error::QuorumUnavailable { .. })),
        "one locker of three answers: {result:?}"
    );
}
