//! Acquires and campaigns dropped at every point of their work, with
//! replies that take a while: what they took must be undone at once (the
//! undo "goes out when it is dropped"), not left for the lockers to expire
//! a validity later.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::Dsync;
use tokio::time::{sleep, timeout};

fn client(cluster: &TestCluster, owner: &str, seed: u64) -> Dsync {
    common::seeded(cluster.net_lockers(), owner, seed)
}

/// Entries (or places) of `owner` on any locker, as `node: resource uid`.
fn left_by(cluster: &TestCluster, owner: &str) -> Vec<String> {
    cluster
        .lockers()
        .iter()
        .enumerate()
        .flat_map(|(i, l)| {
            l.snapshot()
                .into_iter()
                .filter(|e| e.owner == owner)
                .map(move |e| format!("node {i}: {} {}", e.resource, e.uid))
        })
        .collect()
}

fn slow(cluster: &TestCluster) {
    cluster
        .set_latency(
            Latency::Uniform {
                min: Duration::from_millis(1),
                max: Duration::from_millis(30),
            },
            &[0, 1, 2],
        )
        .unwrap();
}

/// docs/semaphore.md: "Every async fn is cancel safe: a dropped acquire
/// leaves no permit, no place in line and no other lock behind." A client
/// with another count, dropped during its line, its count check or its
/// read-out of the counts in use.
#[tokio::test(start_paused = true)]
async fn a_dropped_acquire_of_another_count_leaves_nothing_behind() {
    for cut in (0..240).step_by(3) {
        let cluster = TestCluster::new(3, 40 + cut);
        let a = client(&cluster, "a", 1);
        let b = client(&cluster, "b", 2);
        let held = a.semaphore("jobs", 2).unwrap().acquire().await.unwrap();
        slow(&cluster);
        let sem = b.semaphore("jobs", 3).unwrap();
        let _ = timeout(Duration::from_millis(cut), sem.acquire()).await;
        sleep(Duration::from_secs(5)).await;
        let left = left_by(&cluster, "b");
        assert!(left.is_empty(), "dropped after {cut} ms, left: {left:#?}");
        drop(held);
    }
}

/// As above, for a client with the same count that waits for a slot.
#[tokio::test(start_paused = true)]
async fn a_dropped_acquire_waiting_for_a_slot_leaves_nothing_behind() {
    for cut in (0..240).step_by(3) {
        let cluster = TestCluster::new(3, 400 + cut);
        let a = client(&cluster, "a", 1);
        let b = client(&cluster, "b", 2);
        let held = a
            .semaphore("jobs", 2)
            .unwrap()
            .acquire_many(2)
            .await
            .unwrap();
        slow(&cluster);
        let sem = b.semaphore("jobs", 2).unwrap();
        let _ = timeout(Duration::from_millis(cut), sem.acquire()).await;
        sleep(Duration::from_secs(5)).await;
        let left = left_by(&cluster, "b");
        assert!(left.is_empty(), "dropped after {cut} ms, left: {left:#?}");
        drop(held);
    }
}

/// As above, for an acquire that is granted (nobody holds): dropped at
/// any point before it returns.
#[tokio::test(start_paused = true)]
async fn a_dropped_uncontended_acquire_leaves_nothing_behind() {
    for cut in (0..200).step_by(2) {
        let cluster = TestCluster::new(3, 800 + cut);
        let b = client(&cluster, "b", 2);
        slow(&cluster);
        let sem = b.semaphore("jobs", 2).unwrap();
        let got = timeout(Duration::from_millis(cut), sem.acquire()).await;
        if got.is_ok() {
            continue;
        }
        sleep(Duration::from_secs(5)).await;
        let left = left_by(&cluster, "b");
        assert!(left.is_empty(), "dropped after {cut} ms, left: {left:#?}");
    }
}

/// docs/election.md: "A cancelled campaign leaves no place in line, grant
/// or value behind: its undo goes out when it is dropped."
#[tokio::test(start_paused = true)]
async fn a_dropped_campaign_leaves_nothing_behind() {
    for cut in (0..200).step_by(2) {
        let cluster = TestCluster::new(3, 1200 + cut);
        let b = client(&cluster, "b", 2);
        let watcher = client(&cluster, "w", 3);
        slow(&cluster);
        let election = b.election("boss").unwrap();
        let got = timeout(Duration::from_millis(cut), election.campaign(&b"b"[..])).await;
        if got.is_ok() {
            continue;
        }
        sleep(Duration::from_secs(5)).await;
        let left = left_by(&cluster, "b");
        assert!(left.is_empty(), "dropped after {cut} ms, left: {left:#?}");
        let seen = watcher.election("boss").unwrap().leader().await;
        assert!(
            matches!(seen, Ok(None)),
            "dropped after {cut} ms, leader() says {seen:?}"
        );
    }
}

/// As above, for a campaign that waits behind a leader.
#[tokio::test(start_paused = true)]
async fn a_dropped_campaign_behind_a_leader_leaves_nothing_behind() {
    for cut in (0..200).step_by(3) {
        let cluster = TestCluster::new(3, 1600 + cut);
        let a = client(&cluster, "a", 1);
        let b = client(&cluster, "b", 2);
        let leading = a
            .election("boss")
            .unwrap()
            .campaign(&b"a"[..])
            .await
            .unwrap();
        slow(&cluster);
        let election = b.election("boss").unwrap();
        let _ = timeout(Duration::from_millis(cut), election.campaign(&b"b"[..])).await;
        sleep(Duration::from_secs(5)).await;
        let left = left_by(&cluster, "b");
        assert!(left.is_empty(), "dropped after {cut} ms, left: {left:#?}");
        drop(leading);
    }
}
