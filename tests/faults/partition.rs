#![cfg(feature = "testing")]
//! A holder cut off from the majority learns that it lost its lock at least
//! a safety margin before anybody else can be granted it.

use std::time::Duration;

use crate::harness::{client, instant_of, lease, quorum, Held, Seeded};
use quorum_lock::testing::{EventKind, History, TestCluster};
use quorum_lock::{Error, LockMode};
use tokio::time::{sleep_until, timeout, Instant};

const SEED: u64 = 21;
const RESOURCE: &str = "bucket/object";

/// Runs one partition: `held` by the holder, `wanted` by a client that
/// starts polling when the partition starts. Returns (partition, loss
/// signalled, other client granted) instants.
async fn partition_race(
    n: usize,
    held: LockMode,
    wanted: LockMode,
    seed: u64,
) -> (Instant, Instant, Instant) {
    let ctx = format!("seed {seed}: n = {n}, {held:?} holder, {wanted:?} waiter");
    let cluster = TestCluster::new(n, seed);
    let holder = client(&cluster, "holder", seed);
    let other = client(&cluster, "other", seed + 1);
    let history = History::new();

    let t0 = Instant::now();
    let guard = Held::acquire(
        &holder.rw_mutex([RESOURCE]).unwrap(),
        held,
        Duration::from_secs(1),
    )
    .await
    .unwrap_or_else(|e| panic!("{ctx}: {e}"));
    history.acquired(guard.uid(), guard.resources(), held);
    let lost = instant_of(guard.lost());

    // The smallest cut that leaves the holder short of its quorum, placed
    // between two refreshes.
    let cut: Vec<usize> = (0..n - quorum(n, held) + 1).collect();
    sleep_until(t0 + Duration::from_secs(25)).await;
    cluster.partition("holder", &cut).unwrap();
    let cut_at = Instant::now();
    let mutex = other.rw_mutex([RESOURCE]).unwrap();
    let waiter = tokio::spawn(async move {
        let g = Held::acquire(&mutex, wanted, Duration::from_secs(300)).await;
        (Instant::now(), g)
    });

    let lost_at = timeout(Duration::from_secs(300), lost)
        .await
        .unwrap_or_else(|_| panic!("{ctx}: the loss was never signalled"))
        .seeded(seed, "loss signal");
    history.record_at(lost_at, guard.uid(), EventKind::LostSignalled);
    let (granted_at, second) = waiter.await.seeded(seed, "waiter");
    let second = second.unwrap_or_else(|e| panic!("{ctx}: the waiter never got in: {e}"));
    let resources = second.resources().to_vec();
    let kind = EventKind::Acquired {
        resources,
        mode: wanted,
    };
    history.record_at(granted_at, second.uid(), kind);

    if let Err(v) = history.check() {
        panic!("{ctx}: {v}");
    }
    assert_eq!(guard.unlock().await, Err(Error::LockLost), "{ctx}");
    assert_eq!(second.unlock().await, Ok(()), "{ctx}");
    (cut_at, lost_at, granted_at)
}

/// Checks the order and spacing of one partition race.
async fn check_race(n: usize, held: LockMode, wanted: LockMode, seed: u64) {
    let lease = lease();
    let ctx = format!("seed {seed}: n = {n}, {held:?} holder, {wanted:?} waiter");
    let (cut_at, lost_at, granted_at) = partition_race(n, held, wanted, seed).await;
    assert!(
        lost_at < granted_at,
        "{ctx}: granted at +{:?}, loss signalled at +{:?} after the cut",
        granted_at - cut_at,
        lost_at - cut_at
    );
    let gap = granted_at - lost_at;
    assert!(
        gap >= lease.safety_margin,
        "{ctx}: only {gap:?} between the loss signal and the new grant"
    );
    // The last refresh confirmed before the cut was sent at most one
    // interval before it.
    let trusted = lease.trusted_for();
    let signalled_after = lost_at - cut_at;
    assert!(
        signalled_after <= trusted && signalled_after + lease.refresh_interval >= trusted,
        "{ctx}: loss signalled {signalled_after:?} after the cut"
    );
    let granted_after = granted_at - cut_at;
    assert!(
        granted_after <= lease.validity + Duration::from_secs(2),
        "{ctx}: the waiter got in only {granted_after:?} after the cut"
    );
}

#[tokio::test(start_paused = true)]
async fn a_cut_off_holder_is_told_before_anyone_else_gets_in() {
    let pairs = [
        (LockMode::Write, LockMode::Write),
        (LockMode::Read, LockMode::Write),
        (LockMode::Write, LockMode::Read),
    ];
    for n in [3, 5] {
        for (k, (held, wanted)) in pairs.into_iter().enumerate() {
            check_race(n, held, wanted, SEED + 10 * n as u64 + k as u64).await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn even_clusters_keep_the_margin_against_writers() {
    for n in [2, 4, 6] {
        check_race(n, LockMode::Write, LockMode::Write, SEED + 100 + n as u64).await;
        check_race(n, LockMode::Read, LockMode::Write, SEED + 200 + n as u64).await;
    }
}

/// With an even `n` the holder still reaches `n/2` nodes, a read quorum,
/// when it is cut off from just enough nodes to miss its write quorum.
/// Declaring the loss force-releases the entries on those nodes at once
/// (`refresh::declare_lost`), so a reader is granted within its backoff of
/// the loss signal instead of a safety margin later, as the `Lease` docs
/// promise ("the holder learns of the loss at least `safety_margin` before
/// any locker can free the lock for somebody else").
#[tokio::test(start_paused = true)]
async fn even_clusters_keep_the_margin_against_readers() {
    check_race(4, LockMode::Write, LockMode::Read, SEED + 300).await;
}
