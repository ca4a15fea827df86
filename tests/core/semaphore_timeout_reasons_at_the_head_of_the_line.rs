//! Why `Semaphore::acquire_timeout` gives up at the head of the line, when
//! lockers hang, restart into quarantine, or crash while a permit is held
//! elsewhere. The rustdoc of `acquire_timeout` and docs/semaphore.md:
//! `Error::Timeout` "when the permits (or the line) were held elsewhere",
//! `Error::Quarantined` or `Error::QuorumUnavailable` "when the lockers
//! could not grant".
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error, LockerConfig, SemaphorePermit, WaitReason};
use tokio::task::JoinHandle;
use tokio::time::sleep;

use super::lost_locks_and_wait_outcomes::entries_on;
use crate::common;

const SEED: u64 = 3711;

fn client(cluster: &TestCluster, owner: &str) -> Dsync {
    common::seeded(cluster.net_lockers(), owner, SEED)
}

/// "h", and its `acquire_timeout(3 s)` of the 2-permit semaphore `name`
/// spawned once the four lockers of `cluster` answer after 100 ms; 150 ms
/// later it is in line on all four.
async fn at_the_head_of_the_line(
    cluster: &TestCluster,
    name: &str,
) -> (Dsync, JoinHandle<Result<SemaphorePermit, Error>>) {
    let h = client(cluster, "h");
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[0, 1, 2, 3])
        .unwrap();
    let sem = h.semaphore(name, 2).unwrap();
    let acquire = tokio::spawn(async move { sem.acquire_timeout(Duration::from_secs(3)).await });
    sleep(Duration::from_millis(150)).await;
    assert_eq!(
        entries_on(cluster, &format!("semaphore/{name}/queue")),
        4,
        "in line"
    );
    (h, acquire)
}

/// Four lockers whose restarts begin a 60 s quarantine.
fn four_with_a_quarantine_of_60_s() -> TestCluster {
    let config = LockerConfig {
        quarantine: Duration::from_secs(60),
        ..LockerConfig::default()
    };
    TestCluster::with_config(4, SEED, config)
}

#[tokio::test(start_paused = true)]
async fn acquire_timeout_with_two_of_four_lockers_hanging_at_the_head_of_the_line_says_unavailable()
{
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(4, SEED);
    let (_h, acquire) = at_the_head_of_the_line(&cluster, "hang4").await;
    cluster.set_hang(true, &[2, 3]).unwrap();
    let result = acquire.await.unwrap();
    eprintln!("result: {result:?}");
    assert!(
        matches!(
            result,
            Err(Error::QuorumUnavailable { .. } | Error::Quarantined { .. })
        ),
        "nothing is held elsewhere and 2 of 4 lockers hang, yet: {result:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn acquire_timeout_with_two_of_four_lockers_in_quarantine_at_the_head_of_the_line_says_quarantined(
) {
    eprintln!("seed {SEED}");
    let cluster = four_with_a_quarantine_of_60_s();
    let (_h, acquire) = at_the_head_of_the_line(&cluster, "quar4").await;
    cluster.restart(&[2, 3]).unwrap();
    let result = acquire.await.unwrap();
    eprintln!("result: {result:?}");
    assert!(
        matches!(result, Err(Error::Quarantined { .. })),
        "nothing is held elsewhere and 2 of 4 lockers are in quarantine, yet: {result:?}"
    );
}

async fn held_elsewhere_with_lockers_down(n: usize, down: &[usize]) {
    eprintln!("seed {SEED}, {n} lockers, down {down:?}");
    let cluster = TestCluster::new(n, SEED);
    let (h, o) = (client(&cluster, "h"), client(&cluster, "o"));
    let name = format!("held{n}");
    let held = o.semaphore(&name, 1).unwrap().acquire().await.unwrap();
    cluster.crash(down).unwrap();
    let sem = h.semaphore(&name, 1).unwrap();
    let watcher = sem.clone();
    let acquire = tokio::spawn(async move { sem.acquire_timeout(Duration::from_secs(5)).await });
    sleep(Duration::from_secs(3)).await;
    let status = watcher.waiting();
    eprintln!("at 3 s: {:?}", status.as_ref().map(ToString::to_string));
    assert_eq!(
        status.map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere),
        "o holds the only permit and a quorum answers"
    );
    let result = acquire.await.unwrap();
    eprintln!("result: {result:?}");
    assert!(
        matches!(result, Err(Error::Timeout)),
        "o holds the only permit and a quorum of lockers answers, yet: {result:?}"
    );
    drop(held);
}

#[tokio::test(start_paused = true)]
async fn acquire_timeout_behind_a_holder_with_two_of_five_lockers_down_says_timeout() {
    held_elsewhere_with_lockers_down(5, &[3, 4]).await;
}

#[tokio::test(start_paused = true)]
async fn acquire_timeout_behind_a_holder_with_one_of_four_lockers_down_says_timeout() {
    held_elsewhere_with_lockers_down(4, &[3]).await;
}

/// While h waits on the slots, held by o, two of three lockers crash: from
/// then on only one answers, not a quorum.
async fn slots_held_then_lockers_crash(permits: usize) {
    eprintln!("seed {SEED}, {permits} permits");
    let cluster = TestCluster::new(3, SEED);
    let (h, o) = (client(&cluster, "h"), client(&cluster, "o"));
    let name = format!("crash{permits}");
    let theirs = o.semaphore(&name, permits).unwrap();
    let mut held = Vec::new();
    for _ in 0..permits {
        held.push(theirs.acquire().await.unwrap());
    }
    let sem = h.semaphore(&name, permits).unwrap();
    let watcher = sem.clone();
    let acquire = tokio::spawn(async move { sem.acquire_timeout(Duration::from_secs(20)).await });
    sleep(Duration::from_secs(2)).await;
    eprintln!("at 2 s: {:?}", watcher.waiting().map(|s| s.to_string()));
    cluster.crash(&[1, 2]).unwrap();
    sleep(Duration::from_secs(15)).await;
    let status = watcher.waiting();
    eprintln!("at 17 s: {:?}", status.as_ref().map(ToString::to_string));
    let result = acquire.await.unwrap();
    eprintln!("result: {result:?}");
    assert!(
        matches!(result, Err(Error::QuorumUnavailable { .. })),
        "only 1 of 3 lockers answered for the last 18 s, yet: {result:?}"
    );
    drop(held);
}

#[tokio::test(start_paused = true)]
async fn acquire_timeout_on_held_slots_after_two_of_three_lockers_crash_says_unavailable_one_permit(
) {
    slots_held_then_lockers_crash(1).await;
}

#[tokio::test(start_paused = true)]
async fn acquire_timeout_on_held_slots_after_two_of_three_lockers_crash_says_unavailable_three_permits(
) {
    slots_held_then_lockers_crash(3).await;
}

/// Passes: four lockers; at the head of the line one locker restarts
/// into a 60 s quarantine and two crash. The count's check (a write,
/// quorum 3) could not be granted even once the quarantine ends, so the
/// acquire must not say `Quarantined`. docs/guarantees.md:
/// `Error::Quarantined` "when lockers in quarantine after a restart are
/// what keeps a quorum from granting; `Error::QuorumUnavailable` ...
/// otherwise".
#[tokio::test(start_paused = true)]
async fn acquire_timeout_with_one_in_quarantine_and_two_of_four_down_at_the_head_of_the_line_says_unavailable(
) {
    eprintln!("seed {SEED}");
    let cluster = four_with_a_quarantine_of_60_s();
    let (_h, acquire) = at_the_head_of_the_line(&cluster, "mixed4").await;
    cluster.restart(&[1]).unwrap();
    cluster.crash(&[2, 3]).unwrap();
    let result = acquire.await.unwrap();
    eprintln!("result: {result:?}");
    assert!(
        matches!(result, Err(Error::QuorumUnavailable { .. })),
        "1 of 4 lockers answers, 1 is in quarantine, 2 are down: the count's check (a write \
         quorum of 3) cannot be granted when the quarantine ends, yet: {result:?}"
    );
}
