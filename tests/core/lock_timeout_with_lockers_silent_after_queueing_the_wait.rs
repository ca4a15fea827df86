//! Reproduces a past break: a push wait queued by three lockers, two of which then went silent (their re-check unanswered for 25 times twice their answer time), read them as holding the lock elsewhere and gave up with `Timeout` instead of `QuorumUnavailable`.
//!
//! docs/guarantees.md ("Why a wait waits"): "A locker that has not
//! answered counts as still answering for twice as long as its latest
//! answer took, counted from the earliest call it has left unanswered,
//! whatever it answered since (a poll that asks again does not restart
//! it ...), and as unreachable after that", and `Error::Timeout` is for a
//! lock held elsewhere when "a quorum answered or is still answering";
//! `Error::QuorumUnavailable`, naming each locker that did not answer,
//! "when too few lockers answer". A place in line of the round before
//! stood in only "unless it has since been silent too long"; a place of
//! the current round's first request, left behind by a locker that has
//! not answered the request that renews it, stood forever. Now: "one that
//! refused it or gave it a place in line, and has since left a call
//! unanswered that long (the re-check that renews the place, say), counts
//! as unreachable". (Silence counts from 100 ms at least; 490 ms is well
//! past that.)
//!
//! Three lockers, 10 ms each (quorum 2). Another client holds the lock.
//! The wait (push, the default, re-checked every second) is queued by all
//! three at 10 ms. Nodes 1 and 2 die at 500 ms; the re-check sent to them
//! at about 1 s is never answered. At 1.5 s they have been silent for
//! about 490 ms, 24 times twice their latest answer: only node 0 answers,
//! and one of three is no quorum. `waiting()` still says "held elsewhere:
//! 3 of 3 lockers" and `lock_timeout` gives up with `Timeout`.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_wait_for_a_held_lock::Scene;
use quorum_lock::testing::{CallKind, Latency};
use quorum_lock::{Error, WaitReason};
use tokio::time::sleep;

const SEED: u64 = 36;

#[tokio::test(start_paused = true)]
async fn lock_timeout_names_lockers_silent_after_queueing_the_wait() {
    let seed = SEED;
    let scene = Scene::answering_in(3, seed, Latency::Fixed(Duration::from_millis(10)));
    let cluster = &scene.cluster;
    let endpoints: Vec<String> = cluster.net_lockers().iter().map(|l| l.endpoint()).collect();
    let start = scene.start;
    let _held = scene.hold().await;
    let (mutex, wait) = scene.wait_now(Duration::from_millis(1_500));
    sleep(Duration::from_millis(490).saturating_sub(start.elapsed())).await;
    let queued = mutex.waiting();
    eprintln!(
        "queued at {:?}: {:?}",
        start.elapsed(),
        queued.as_ref().map(|s| s.to_string())
    );
    assert_eq!(queued.map(|s| s.reason()), Some(WaitReason::HeldElsewhere));
    let asked_before = cluster.nodes()[1].stats(CallKind::Lock).seen;
    cluster.crash(&[1, 2]).unwrap();
    sleep(Duration::from_millis(1_450).saturating_sub(start.elapsed())).await;
    let asked_after = cluster.nodes()[1].stats(CallKind::Lock).seen;
    let status = mutex.waiting();
    eprintln!(
        "at {:?} (node-1 asked {asked_before} then {asked_after} times): {:?}",
        start.elapsed(),
        status.as_ref().map(|s| (s.to_string(), s.reason()))
    );
    assert!(
        asked_after > asked_before,
        "the re-check was sent to the dead lockers"
    );
    let result = scene.gave_up(wait).await;
    let Err(Error::QuorumUnavailable { unreachable, .. }) = &result else {
        panic!(
            "nodes 1 and 2 left the re-check unanswered for ~490 ms (answers take 10 ms): \
             one locker of three answers, expected QuorumUnavailable, got {result:?} \
             (waiting() said {:?})",
            status.map(|s| s.to_string())
        );
    };
    let named: Vec<&str> = unreachable.iter().map(|u| u.endpoint.as_str()).collect();
    assert_eq!(named, [endpoints[1].as_str(), endpoints[2].as_str()]);
    assert_eq!(status.map(|s| s.reason()), Some(WaitReason::NoQuorum));
}
