//! Reproduces a past break: a wait refused for quarantine by every locker gave up with `QuorumUnavailable` ("no answer within 5.0s") once a call of the same client lost in the lockers' restart, asked long before the refusals, timed out.
//!
//! docs/guarantees.md ("Why a wait waits"): "A wait that gives up among
//! lockers all in quarantine therefore says `Quarantined`"; "a locker
//! that refused for quarantine and then leaves a call asked since the
//! refusal unanswered for too long (below) counts as unreachable, not as
//! in quarantine (a call asked before it, lost in a restart say, is no
//! news of a locker that answered since)". A lost call that times out is
//! no news either; the coordinator keeps one failure per locker, the
//! latest noted, and the timeout of the lost call replaces the refusal.
//!
//! Three lockers answering in 1 ms (quorum 2). At 10 ms they crash, and
//! the client sends `force_unlock(["other"])`, which is lost (times out
//! at ~5010 ms); at 20 ms they restart, in quarantine. At 4900 ms the
//! client waits on "job" with a deadline of 130 ms: every locker refuses
//! it for quarantine, and the wait backs off. From 5010 ms until its next
//! try (at ~5065 ms, refused again) the wait reads the three as
//! unreachable ("no answer within 5.0s"), and, its deadline falling
//! there, gives up at 5030 ms with `QuorumUnavailable`. Without the lost
//! call it says `Quarantined`.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_wait_for_a_held_lock::warm;
use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Error, WaitReason};
use tokio::time::{sleep, Instant};

const SEED: u64 = 4_729;

async fn give_up(lost_call: bool) -> (Option<WaitReason>, Result<(), Error>) {
    eprintln!("seed {SEED}, a call lost in the restart: {lost_call}");
    let cluster = TestCluster::new(3, SEED);
    let fast = Latency::Fixed(Duration::from_millis(1));
    cluster.set_latency(fast, &[0, 1, 2]).unwrap();
    let h = common::seeded(cluster.net_lockers(), "h", SEED);
    let start = Instant::now();
    // The client's lockers have answered it before (in 1 ms).
    warm(&h).await;
    sleep(Duration::from_millis(10).saturating_sub(start.elapsed())).await;
    cluster.crash(&[0, 1, 2]).unwrap();
    let admin = h.clone();
    let lost = tokio::spawn(async move {
        if lost_call {
            admin.force_unlock(["other"]).await.map(|_| ())
        } else {
            Ok(())
        }
    });
    sleep(Duration::from_millis(20).saturating_sub(start.elapsed())).await;
    cluster.restart(&[0, 1, 2]).unwrap();
    cluster.set_latency(fast, &[0, 1, 2]).unwrap();
    sleep(Duration::from_millis(4_900).saturating_sub(start.elapsed())).await;
    let mutex = h.rw_mutex(["job"]).unwrap();
    let wait = common::spawn_lock_timeout(&mutex, Duration::from_millis(130));
    sleep(Duration::from_millis(4_950).saturating_sub(start.elapsed())).await;
    eprintln!(
        "at {:?}: {:?}",
        start.elapsed(),
        mutex.waiting().map(|s| s.to_string())
    );
    sleep(Duration::from_millis(5_020).saturating_sub(start.elapsed())).await;
    let status = mutex.waiting();
    eprintln!(
        "at {:?}: {:?}",
        start.elapsed(),
        status.as_ref().map(|s| s.to_string())
    );
    let result = common::ended(wait).await;
    eprintln!("gave up at {:?} with: {result:?}", start.elapsed());
    let lost = tokio::time::timeout(Duration::from_secs(5), lost).await;
    eprintln!("the lost force_unlock: {lost:?}");
    (status.map(|s| s.reason()), result)
}

fn assert_quarantined((reason, result): (Option<WaitReason>, Result<(), Error>)) {
    assert_eq!(reason, Some(WaitReason::Quarantine));
    assert!(
        matches!(result, Err(Error::Quarantined { .. })),
        "every locker refused the wait for quarantine: {result:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn lock_timeout_in_quarantine_after_a_restart() {
    assert_quarantined(give_up(false).await);
}

#[tokio::test(start_paused = true)]
async fn lock_timeout_in_quarantine_after_a_call_lost_in_the_restart_timed_out() {
    assert_quarantined(give_up(true).await);
}
