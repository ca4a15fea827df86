//! Why a wait waits and why it gave up (`DRWMutex::waiting`, the errors of
//! `lock_timeout`), and finishing the releases a process leaves behind
//! before it exits (`Dsync::finish_releases`).
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error, Lease, WaitReason};
use tokio::time::{sleep, Instant};

use crate::election_support::client;

/// The entries of `owner` on every locker.
fn entries_of(cluster: &TestCluster, owner: &str) -> usize {
    cluster
        .lockers()
        .iter()
        .map(|l| l.snapshot().iter().filter(|e| e.owner == owner).count())
        .sum()
}

#[tokio::test(start_paused = true)]
async fn a_wait_says_which_lockers_are_unreachable_and_why() {
    let cluster = TestCluster::new(3, 1);
    let h = client(&cluster, "h");
    let mutex = h.rw_mutex(["jobs"]).unwrap();
    cluster.crash(&[0, 2]).unwrap();
    let waiter = mutex.clone();
    let wait = tokio::spawn(async move { waiter.lock().await });
    sleep(Duration::from_secs(3)).await;
    let status = mutex.waiting().expect("the wait reports");
    assert_eq!(status.reason(), WaitReason::NoQuorum, "{status}");
    let down: Vec<&str> = status
        .unreachable
        .iter()
        .map(|u| u.endpoint.as_str())
        .collect();
    let names = cluster.net_lockers();
    assert_eq!(down, [names[0].endpoint(), names[2].endpoint()], "{status}");
    assert!(
        status.unreachable.iter().all(|u| !u.reason.is_empty()),
        "{status}"
    );
    let text = status.to_string();
    assert!(
        text.contains("only 1 of 3 lockers reachable, 2 needed"),
        "{text}"
    );

    // Back up: the wait is granted and stops reporting.
    cluster.heal(&[0, 2]).unwrap();
    let guard = wait
        .await
        .unwrap()
        .expect("granted once the nodes are back");
    assert!(mutex.waiting().is_none());
    guard.unlock().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_wait_that_gives_up_on_a_held_lock_says_held_elsewhere() {
    let cluster = TestCluster::new(3, 2);
    let (h, o) = (client(&cluster, "h"), client(&cluster, "o"));
    let held = o.rw_mutex(["jobs"]).unwrap().lock().await.unwrap();
    let mutex = h.rw_mutex(["jobs"]).unwrap();
    // One locker down does not change the verdict: a quorum answered.
    cluster.crash(&[1]).unwrap();
    let err = mutex
        .lock_timeout(Duration::from_secs(2))
        .await
        .unwrap_err();
    assert_eq!(err, Error::Timeout);
    assert!(err.to_string().contains("held elsewhere"), "{err}");
    held.unlock().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_lost_lock_is_freed_as_soon_as_its_holder_lets_go() {
    let cluster = TestCluster::new(3, 3);
    let (h, o) = (client(&cluster, "h"), client(&cluster, "o"));
    let guard = h.rw_mutex(["jobs"]).unwrap().lock().await.unwrap();
    // Refreshes to two lockers go unanswered: the lock is lost at the end
    // of its trust, a safety margin before those lockers could expire it.
    cluster.set_hang(true, &[1, 2]).unwrap();
    guard.lost().await;
    cluster.set_hang(false, &[1, 2]).unwrap();
    let lost_at = Instant::now();
    assert_eq!(entries_of(&cluster, "h"), 3, "the lockers still hold it");

    // The holder stopped its work and let go: nothing is left to protect.
    drop(guard);
    h.finish_releases(Duration::from_secs(5))
        .await
        .expect("the releases finish");
    let margin = Lease::default().safety_margin;
    assert!(lost_at.elapsed() < margin / 2, "{:?}", lost_at.elapsed());
    assert_eq!(entries_of(&cluster, "h"), 0);
    let next = o.rw_mutex(["jobs"]).unwrap().try_lock().await;
    assert!(next.is_ok(), "{next:?}");
}

#[tokio::test(start_paused = true)]
async fn a_lost_lock_whose_holder_works_on_keeps_its_entries_for_the_margin() {
    let cluster = TestCluster::new(3, 4);
    let (h, o) = (client(&cluster, "h"), client(&cluster, "o"));
    let guard = h.rw_mutex(["jobs"]).unwrap().lock().await.unwrap();
    cluster.set_hang(true, &[1, 2]).unwrap();
    guard.lost().await;
    cluster.set_hang(false, &[1, 2]).unwrap();
    // The guard is kept: its holder may still be stopping its work.
    sleep(Lease::default().safety_margin / 2).await;
    let other = o.rw_mutex(["jobs"]).unwrap().try_lock().await;
    assert!(matches!(other, Err(Error::WouldBlock)), "{other:?}");
    drop(guard);
}

#[tokio::test(start_paused = true)]
async fn finish_releases_waits_for_the_grants_of_an_abandoned_wait() {
    let cluster = TestCluster::new(3, 5);
    let h = client(&cluster, "h");
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(50)), &[0, 1, 2])
        .unwrap();
    let mutex = h.rw_mutex(["jobs"]).unwrap();
    // Gives up while its calls are in flight: they are granted after.
    let err = mutex
        .lock_timeout(Duration::from_millis(10))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::QuorumUnavailable { unreachable, .. }
            if unreachable.iter().all(|u| u.reason.starts_with("no answer yet"))),
        "{err:?}"
    );
    let start = Instant::now();
    h.finish_releases(Duration::from_secs(5))
        .await
        .expect("the releases finish");
    // It waited for the late grants and their releases (one round trip each).
    assert!(start.elapsed() >= Duration::from_millis(50));
    assert_eq!(entries_of(&cluster, "h"), 0);
    assert!(h.finish_releases(Duration::ZERO).await.is_ok(), "idle now");
}

#[tokio::test(start_paused = true)]
async fn finish_releases_says_how_many_are_still_running_at_its_bound() {
    let cluster = TestCluster::new(3, 6);
    let h: Dsync = client(&cluster, "h");
    let guard = h.rw_mutex(["jobs"]).unwrap().lock().await.unwrap();
    cluster.set_hang(true, &[0, 1, 2]).unwrap();
    drop(guard);
    let err = h
        .finish_releases(Duration::from_millis(100))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::ReleasesPending { pending, .. } if pending >= 1),
        "{err:?}"
    );
    cluster.set_hang(false, &[0, 1, 2]).unwrap();
    h.finish_releases(Duration::from_secs(120))
        .await
        .expect("the releases finish once the lockers answer");
    assert_eq!(entries_of(&cluster, "h"), 0);
}
