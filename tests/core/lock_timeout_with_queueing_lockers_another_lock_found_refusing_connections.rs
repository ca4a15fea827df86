//! Reproduces a past break: a wait queued by two lockers that another lock's call then found refusing connections still read them as holding the lock elsewhere and gave up with `Timeout`, while the same two lockers merely silent on that call read as unreachable (`QuorumUnavailable`).
//!
//! docs/guarantees.md ("Why a wait waits"): "a locker another lock's call
//! just found down counts as down"; "the same silence outweighs what a
//! locker said of this round: one that refused it or gave it a place in
//! line, and has since left a call unanswered that long ..., counts as
//! unreachable, not as holding the lock elsewhere"; `Error::Timeout` is
//! for a lock held elsewhere when "a quorum answered or is still
//! answering", `Error::QuorumUnavailable` "when too few lockers answer".
//! A connection refused is more than silence: it is no answer at all, at
//! once. Yet only silence outweighs a place in line.
//!
//! Three lockers answering in 1 ms (quorum 2). Another client holds
//! "res"; the client waits for it with a deadline of 500 ms, queued by all
//! three at about 1 ms. At 100 ms nodes 1 and 2 go away: either they hang
//! (swallow calls) or refuse connections. At 110 ms the client tries lock
//! "other": the calls to nodes 1 and 2 hang, or fail at once. The wait's
//! own re-check is not due before its deadline.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::{Error, WaitReason};
use tokio::time::sleep;

use crate::a_wait_for_a_held_lock::{until, Scene};

const SEED: u64 = 3_911;

async fn give_up_when_nodes_go(refuse: bool) -> (Option<WaitReason>, Result<(), Error>) {
    let scene = Scene::new(3, SEED);
    let _held = scene.hold().await;
    let (mutex, wait) = scene.wait_now(Duration::from_millis(500));
    until(scene.start, 100).await;
    assert_eq!(
        mutex.waiting().map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere)
    );
    if refuse {
        scene.cluster.set_refuse(true, &[1, 2]).unwrap();
    } else {
        scene.cluster.set_hang(true, &[1, 2]).unwrap();
    }
    sleep(Duration::from_millis(10)).await;
    let other = scene.h.rw_mutex(["other"]).unwrap();
    let tried = tokio::spawn(async move { other.try_lock().await.map(|_g| ()) });
    until(scene.start, 400).await;
    let status = mutex.waiting();
    eprintln!(
        "{} at {:?}: {:?}",
        if refuse { "refusing" } else { "hanging" },
        scene.start.elapsed(),
        status.as_ref().map(|s| s.to_string())
    );
    let result = scene.gave_up(wait).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), tried).await;
    (status.map(|s| s.reason()), result)
}

#[tokio::test(start_paused = true)]
async fn lockers_silent_on_another_lock_s_call_read_as_unreachable() {
    let (reason, result) = give_up_when_nodes_go(false).await;
    assert_eq!(reason, Some(WaitReason::NoQuorum));
    assert!(
        matches!(result, Err(Error::QuorumUnavailable { .. })),
        "{result:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn lockers_refusing_another_lock_s_call_read_as_unreachable() {
    let (reason, result) = give_up_when_nodes_go(true).await;
    assert_eq!(
        reason,
        Some(WaitReason::NoQuorum),
        "nodes 1 and 2 refuse connections: one locker of three answers"
    );
    assert!(
        matches!(result, Err(Error::QuorumUnavailable { .. })),
        "{result:?}"
    );
}
