//! Reproduces a past break: a wait queued by two lockers that a later call found refusing connections read them as unreachable only until an older call of this client to them timed out, and then read them as holding the lock elsewhere again and gave up with `Timeout`.
//!
//! docs/guarantees.md ("Why a wait waits"): a locker that gave the wait a
//! place in line "and since then ... was found failing by a call of this
//! client (a connection refused), counts as unreachable, not as holding
//! the lock elsewhere. Only calls asked since the request it answered
//! count, for silence and for failures alike: an older call of another
//! lock, slow, lost or timing out later, is no news of a locker that
//! answered a later one." The older call's timeout is no news, but it is
//! also no answer: the refusal asked since still stands. The coordinator
//! keeps one failure per locker, the latest noted, and `gone_since`
//! filters it by when its call was asked, so the older call's timeout
//! hides the newer refusal.
//!
//! Three lockers answering in 1 ms (quorum 2). Another client holds
//! "res". At 10 ms the client sends `force_unlock(["other"])`, whose
//! replies from nodes 1 and 2 are lost: those calls fail with
//! `LockerTimeout` at ~5010 ms. At 4900 ms the client waits for "res" with
//! a deadline of 500 ms; all three queue the wait. At 4950 ms nodes 1 and 2
//! refuse connections, and at 4960 ms a `force_unlock(["spare"])` finds
//! them so (nothing retries it). At 4990 ms `waiting()` rightly says
//! `NoQuorum`; at 5100 ms, after the old force-unlock calls timed out, it
//! says `HeldElsewhere`, and the wait gives up at 5400 ms with `Timeout`.
//! (With a `try_lock` in place of the second force-unlock, its unlocks
//! retried in the background refresh the refusal now and then, and the
//! status flickers between the two.)
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::{Error, WaitReason};

use crate::a_wait_for_a_held_lock::{until, Scene};

const SEED: u64 = 4_517;

#[tokio::test(start_paused = true)]
async fn lock_timeout_with_queueing_lockers_refusing_connections_then_an_older_call_timing_out() {
    let scene = Scene::new(3, SEED);
    let _held = scene.hold_and_warm().await;
    let lost = scene.lose_a_force_unlock().await;
    let (mutex, wait) = scene.wait_at(4_900, Duration::from_millis(500)).await;
    until(scene.start, 4_950).await;
    let queued = mutex.waiting();
    scene.cluster.set_refuse(true, &[1, 2]).unwrap();
    until(scene.start, 4_960).await;
    let forced = scene.h.force_unlock(["spare"]).await;
    eprintln!(
        "force_unlock of \"spare\" at {:?}: {forced:?}",
        scene.start.elapsed()
    );
    let before = scene.status_at(&mutex, 4_990).await;
    let after = scene.status_at(&mutex, 5_100).await;
    let result = scene.gave_up(wait).await;
    let lost = tokio::time::timeout(Duration::from_secs(5), lost).await;
    eprintln!("the force_unlock of \"other\": {lost:?}");
    assert_eq!(
        queued.map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere),
        "all three queued the wait"
    );
    assert_eq!(
        before.map(|s| s.reason()),
        Some(WaitReason::NoQuorum),
        "nodes 1 and 2 refused a call asked after they queued the wait"
    );
    assert_eq!(
        after.map(|s| s.reason()),
        Some(WaitReason::NoQuorum),
        "nodes 1 and 2 have not answered since they refused; an older call timing out is no answer"
    );
    assert!(
        matches!(result, Err(Error::QuorumUnavailable { .. })),
        "nodes 1 and 2 refuse connections: one locker of three answers: {result:?}"
    );
}
