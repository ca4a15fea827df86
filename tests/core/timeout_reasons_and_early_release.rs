//! Why a semaphore or an election timed out, the early release of a lost
//! lock whose holder let go, and `finish_releases`, at their edges. Every
//! test runs on paused time with fixed seeds.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Error};
use tokio::time::sleep;

use super::lost_locks_and_wait_outcomes::entries_on;
use crate::common;

fn client(cluster: &TestCluster, owner: &str) -> Dsync {
    common::seeded(cluster.net_lockers(), owner, 2525)
}

fn unavailable(result: &Result<impl std::fmt::Debug, Error>) -> bool {
    matches!(
        result,
        Err(Error::QuorumUnavailable { .. } | Error::Quarantined { .. })
    )
}

// ---------------------------------------------------------------------
// 1. Why a semaphore or an election gave up (the OPERATION watch).
// ---------------------------------------------------------------------

/// Passes (attack failed): on a healthy cluster with the only permit held
/// by another client, `acquire_timeout` says `Error::Timeout` (held
/// elsewhere), although on its way it was granted the line and the count
/// (which report `granted` to the outer watch) and then only waited on the
/// slot.
#[tokio::test(start_paused = true)]
async fn semaphore_timeout_held_elsewhere_on_a_healthy_cluster() {
    let cluster = TestCluster::new(3, 2551);
    let (h, o) = (client(&cluster, "h"), client(&cluster, "o"));
    let held = o.semaphore("r25b-s1", 1).unwrap().acquire().await.unwrap();
    let sem = h.semaphore("r25b-s1", 1).unwrap();
    let result = sem.acquire_timeout(Duration::from_secs(3)).await;
    assert!(
        matches!(result, Err(Error::Timeout)),
        "held elsewhere on a healthy cluster: {result:?}"
    );
    drop(held);
}

/// Passes (attack failed): the same wait on a cluster with 2 of 3 lockers
/// down and no permit held anywhere says the lockers are unavailable, not
/// "held elsewhere".
#[tokio::test(start_paused = true)]
async fn semaphore_timeout_on_a_cluster_that_is_down() {
    let cluster = TestCluster::new(3, 2552);
    let h = client(&cluster, "h");
    cluster.crash(&[1, 2]).unwrap();
    let sem = h.semaphore("r25b-s2", 2).unwrap();
    let result = sem.acquire_timeout(Duration::from_secs(3)).await;
    assert!(unavailable(&result), "2 of 3 down, none held: {result:?}");
}

/// Passes (attack failed): a permit held by a client that is partitioned
/// from one locker, and that locker down for the acquirer too: a quorum
/// still answers "held", so the wait says `Error::Timeout`, not
/// `QuorumUnavailable`, though one of its slot rounds always has a failed
/// locker.
#[tokio::test(start_paused = true)]
async fn semaphore_timeout_held_with_one_locker_down() {
    let cluster = TestCluster::new(3, 2553);
    let (h, o) = (client(&cluster, "h"), client(&cluster, "o"));
    let held = o.semaphore("r25b-s3", 1).unwrap().acquire().await.unwrap();
    cluster.crash(&[2]).unwrap();
    let sem = h.semaphore("r25b-s3", 1).unwrap();
    let result = sem.acquire_timeout(Duration::from_secs(3)).await;
    assert!(
        matches!(result, Err(Error::Timeout)),
        "held elsewhere, a quorum reachable: {result:?}"
    );
    drop(held);
}

/// Passes (attack failed): an election led by another candidate on a
/// healthy cluster: `campaign_timeout` (whose operation treats running out
/// of time after a grant as unanswered calls) says `Error::Timeout`.
#[tokio::test(start_paused = true)]
async fn campaign_timeout_behind_a_leader_on_a_healthy_cluster() {
    let cluster = TestCluster::new(3, 2554);
    let (h, o) = (client(&cluster, "h"), client(&cluster, "o"));
    let leading = o
        .election("r25b-e1")
        .unwrap()
        .campaign(b"o".to_vec())
        .await
        .unwrap();
    let result = h
        .election("r25b-e1")
        .unwrap()
        .campaign_timeout(b"h".to_vec(), Duration::from_secs(3))
        .await;
    assert!(
        matches!(result, Err(Error::Timeout)),
        "another candidate leads on a healthy cluster: {result:?}"
    );
    drop(leading);
}

/// Reproduces a past break (fixed; the test checks the fix): a `Holder`'s `lock_timeout` that waits its turn behind a
/// clone's `try_lock` reads why from `mutex.waiting()`. A `try_lock` is a
/// one-round acquire that keeps no board entry, so `waiting()` is `None`
/// and the timeout says `Error::Timeout` ("held elsewhere") while 2 of 3
/// lockers hang and nobody holds the lock anywhere.
#[tokio::test(start_paused = true)]
async fn holder_timeout_behind_a_clones_try_lock_on_a_hung_cluster() {
    let cluster = TestCluster::new(3, 2555);
    let h = client(&cluster, "h");
    let m = h.rw_mutex(["r25b-h"]).unwrap();
    cluster.set_hang(true, &[1, 2]).unwrap();
    let holder = h.holder();
    let clone = holder.clone();
    let m2 = m.clone();
    let trying = tokio::spawn(async move { holder.try_lock(&m2).await.map(|_| ()) });
    sleep(Duration::from_millis(10)).await;
    let result = clone.lock_timeout(&m, Duration::from_millis(300)).await;
    assert!(
        unavailable(&result),
        "2 of 3 lockers hang and nobody holds r25b-h, yet: {result:?}"
    );
    let tried = trying.await.unwrap();
    assert!(unavailable(&tried), "the try itself: {tried:?}");
}

// ---------------------------------------------------------------------
// 2. A lost lock freed when its holder lets go; finish_releases.
// ---------------------------------------------------------------------

/// Passes (attack failed): the early release of a lost lock (`declare_lost`
/// once `holder_gone`) meets lockers that still hang; their calls time out.
/// Once they answer again, `finish_releases` waits (about 4 s here) until
/// the entries are gone and only then says `Ok`: nothing is left.
#[tokio::test(start_paused = true)]
async fn a_dropped_lost_lock_left_on_lockers_that_answer_again() {
    let cluster = TestCluster::new(3, 2556);
    let h = client(&cluster, "h");
    let g = h.rw_mutex(["r25b-l"]).unwrap().lock().await.unwrap();
    cluster.set_hang(true, &[1, 2]).unwrap();
    g.lost().await;
    assert_eq!(entries_on(&cluster, "r25b-l"), 3);
    drop(g);
    // The force unlocks to 1 and 2 hang until their 5 s deadline.
    sleep(Duration::from_secs(6)).await;
    cluster.set_hang(false, &[1, 2]).unwrap();
    let finished = h.finish_releases(Duration::from_secs(20)).await;
    let left = entries_on(&cluster, "r25b-l");
    assert!(
        finished.is_err() || left == 0,
        "finish_releases said {finished:?} with every locker answering, \
         yet {left} entries of the dropped lost lock are left"
    );
}

/// Passes (attack failed): the same with the holder keeping its lost
/// guard past the margin: after the guard is dropped and the lockers
/// answer again, `finish_releases` is `Ok` only with nothing left.
#[tokio::test(start_paused = true)]
async fn a_lost_lock_freed_after_the_margin_left_on_lockers() {
    let cluster = TestCluster::new(3, 2557);
    let h = client(&cluster, "h");
    let g = h.rw_mutex(["r25b-m"]).unwrap().lock().await.unwrap();
    cluster.set_hang(true, &[1, 2]).unwrap();
    g.lost().await;
    // Margin (10 s) plus the force unlock's deadline (5 s).
    sleep(Duration::from_secs(16)).await;
    cluster.set_hang(false, &[1, 2]).unwrap();
    drop(g);
    let finished = h.finish_releases(Duration::from_secs(20)).await;
    let left = entries_on(&cluster, "r25b-m");
    assert!(
        finished.is_err() || left == 0,
        "finish_releases said {finished:?} with every locker answering, \
         yet {left} entries of the lost lock are left"
    );
}

/// Passes (attack failed): with the lockers that hold the dropped lost
/// lock's entries still hanging, `finish_releases` does not say `Ok`: it
/// keeps its bound and fails with `ReleasesPending`.
#[tokio::test(start_paused = true)]
async fn finish_releases_is_not_ok_while_a_lost_locks_lockers_hang() {
    let cluster = TestCluster::new(3, 2558);
    let h = client(&cluster, "h");
    let g = h.rw_mutex(["r25b-n"]).unwrap().lock().await.unwrap();
    cluster.set_hang(true, &[1, 2]).unwrap();
    g.lost().await;
    drop(g);
    sleep(Duration::from_secs(6)).await;
    let began = tokio::time::Instant::now();
    let finished = h.finish_releases(Duration::from_secs(3)).await;
    assert!(began.elapsed() <= Duration::from_secs(3), "kept its bound");
    assert_eq!(entries_on(&cluster, "r25b-n"), 2);
    assert!(
        matches!(finished, Err(Error::ReleasesPending { .. })),
        "2 entries left on hung lockers, yet {finished:?}"
    );
}

/// Passes (attack failed): `finish_releases` called twice at once (two
/// tasks, one client) while an unlock is queued for a hung locker: neither
/// starts a second drainer that double-sends, both keep their bound, and
/// once the locker answers one more call empties the queue.
#[tokio::test(start_paused = true)]
async fn concurrent_finish_releases_keep_their_bound_and_drain_once() {
    let cluster = TestCluster::new(3, 2559);
    let h = client(&cluster, "h");
    let g = h.rw_mutex(["r25b-c"]).unwrap().lock().await.unwrap();
    cluster.set_hang(true, &[2]).unwrap();
    let unlocked = g.unlock().await;
    assert!(unlocked.is_ok(), "a quorum confirmed: {unlocked:?}");
    let began = tokio::time::Instant::now();
    let (a, b) = futures::join!(
        h.finish_releases(Duration::from_secs(2)),
        h.finish_releases(Duration::from_secs(3))
    );
    assert!(began.elapsed() <= Duration::from_secs(3));
    assert!(a.is_err() && b.is_err(), "{a:?} {b:?}");
    cluster.set_hang(false, &[2]).unwrap();
    let done = h.finish_releases(Duration::from_secs(120)).await;
    assert!(done.is_ok(), "{done:?}");
    assert_eq!(entries_on(&cluster, "r25b-c"), 0);
}
