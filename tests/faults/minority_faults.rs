#![cfg(feature = "testing")]
//! A holder keeps its lock through any fault that leaves it a quorum, and
//! through refresh failures on a majority that end within the trust window
//! (`validity - safety_margin`).

use crate::harness;

use std::time::Duration;

use crate::harness::{client, lease, nodes_holding, quorum, Held};
use quorum_lock::testing::TestCluster;
use quorum_lock::{DRWMutex, Error, LockMode};
use tokio::time::{sleep, sleep_until, Instant};

const SEED: u64 = 11;
const RESOURCE: &str = "volume/7";

/// The first `k` nodes of `n`.
fn first(k: usize) -> Vec<usize> {
    (0..k).collect()
}

/// The largest set of nodes a holder of `mode` can lose and keep its lock.
fn minority(n: usize, mode: LockMode) -> Vec<usize> {
    first(n - quorum(n, mode))
}

/// The holder still holds: not told it lost, and a competing writer neither
/// wins one round nor gets in within a few seconds.
async fn assert_held(held: &Held, other: &DRWMutex, when: &str, seed: u64) {
    assert!(!held.is_lost(), "seed {seed}: lock lost {when}");
    let once = other.try_lock().await;
    assert!(
        matches!(once, Err(Error::WouldBlock)),
        "seed {seed}: a competing try_lock {when} returned {once:?}"
    );
    let waited = other.lock_timeout(Duration::from_secs(3)).await;
    assert!(
        matches!(waited, Err(Error::Timeout)),
        "seed {seed}: a competing lock_timeout {when} returned {waited:?}"
    );
}

/// A cluster, a holder of `mode` on it that acquired at the returned
/// instant, and a competing client's mutex.
async fn held_lock(n: usize, mode: LockMode, seed: u64) -> (TestCluster, Held, DRWMutex, Instant) {
    let cluster = TestCluster::new(n, seed);
    let holder = client(&cluster, "holder", seed);
    let other = client(&cluster, "other", seed + 1)
        .rw_mutex([RESOURCE])
        .unwrap();
    let t0 = Instant::now();
    let held = Held::acquire(
        &holder.rw_mutex([RESOURCE]).unwrap(),
        mode,
        Duration::from_secs(1),
    )
    .await
    .unwrap_or_else(|e| panic!("seed {seed}: first lock failed: {e}"));
    (cluster, held, other, t0)
}

#[tokio::test(start_paused = true)]
async fn a_minority_crash_and_restart_keeps_the_lock() {
    for n in [3, 5] {
        for mode in [LockMode::Write, LockMode::Read] {
            let seed = SEED + n as u64;
            let (cluster, held, other, t0) = held_lock(n, mode, seed).await;
            let down = minority(n, mode);
            let ctx = format!("n = {n}, {mode:?}");
            // Between two refreshes, so that the crash costs one of them.
            sleep_until(t0 + Duration::from_secs(25)).await;
            cluster.crash(&down).unwrap();
            sleep(Duration::from_secs(40)).await;
            assert_held(&held, &other, &format!("with {down:?} down ({ctx})"), seed).await;

            cluster.restart(&down).unwrap();
            let restarted = Instant::now();
            sleep(Duration::from_secs(15)).await;
            assert_held(&held, &other, &format!("in quarantine ({ctx})"), seed).await;

            // The refreshes re-granted the entry on the wiped nodes.
            sleep_until(restarted + cluster.lockers()[0].config().quarantine).await;
            sleep(Duration::from_secs(1)).await;
            assert_eq!(
                nodes_holding(&cluster, held.uid(), held.resources()),
                first(n),
                "seed {seed}: the restarted nodes do not hold the lock again ({ctx})"
            );
            assert_held(&held, &other, &format!("after quarantine ({ctx})"), seed).await;
            assert_eq!(held.unlock().await, Ok(()), "seed {seed}: {ctx}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_minority_partitioned_from_the_holder_keeps_the_lock() {
    for n in [3, 5] {
        let seed = SEED + 10 + n as u64;
        let (cluster, held, other, t0) = held_lock(n, LockMode::Write, seed).await;
        let cut = minority(n, LockMode::Write);
        sleep_until(t0 + Duration::from_secs(25)).await;
        cluster.partition("holder", &cut).unwrap();
        // Well past the validity: the cut nodes expire the entry, the rest
        // keep confirming.
        for minute in 1..=3 {
            sleep(Duration::from_secs(60)).await;
            let when = format!("{minute} min into a partition from {cut:?} (n = {n})");
            assert_held(&held, &other, &when, seed).await;
        }
        cluster.heal_partition("holder", &cut).unwrap();
        sleep(Duration::from_secs(30)).await;
        assert_held(&held, &other, &format!("after healing (n = {n})"), seed).await;
        // The cut nodes expired the entry meanwhile, and a refresh re-grants
        // only on a node in restart quarantine: the lock now rests on the
        // nodes that stayed reachable, still a quorum.
        let holding = nodes_holding(&cluster, held.uid(), held.resources());
        assert!(
            holding.len() >= quorum(n, LockMode::Write),
            "seed {seed}: n = {n}: held on {holding:?} after healing a partition from {cut:?}"
        );
        assert_eq!(held.unlock().await, Ok(()), "seed {seed}: n = {n}");
    }
}

/// How a majority can fail to confirm refreshes, and how to end it.
#[derive(Debug, Clone, Copy)]
enum RefreshFailure {
    Hang,
    Refuse,
    Partition,
    LostRequests,
}

impl RefreshFailure {
    fn set(self, cluster: &TestCluster, nodes: &[usize], on: bool) {
        match self {
            RefreshFailure::Hang => cluster.set_hang(on, nodes),
            RefreshFailure::Refuse => cluster.set_refuse(on, nodes),
            RefreshFailure::Partition if on => cluster.partition("holder", nodes),
            RefreshFailure::Partition => cluster.heal_partition("holder", nodes),
            RefreshFailure::LostRequests => {
                cluster.drop_replies(if on { 1.0 } else { 0.0 }, false, nodes)
            }
        }
        .unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn refresh_failures_on_a_majority_within_the_trust_window_are_survived() {
    let outage = Duration::from_secs(30);
    assert!(outage + lease().refresh_interval < lease().trusted_for());
    let kinds = [
        RefreshFailure::Hang,
        RefreshFailure::Refuse,
        RefreshFailure::Partition,
        RefreshFailure::LostRequests,
    ];
    for n in [3, 5] {
        for (k, kind) in kinds.into_iter().enumerate() {
            let seed = SEED + 20 + 10 * n as u64 + k as u64;
            let (cluster, held, other, t0) = held_lock(n, LockMode::Write, seed).await;
            let majority = first(quorum(n, LockMode::Write));
            let ctx = format!("{kind:?} on {majority:?} of {n}");
            let lost = harness::instant_of(held.lost());
            sleep_until(t0 + Duration::from_secs(25)).await;
            kind.set(&cluster, &majority, true);
            sleep(outage - Duration::from_secs(3)).await;
            assert!(!held.is_lost(), "seed {seed}: lost during {ctx}");
            let waited = other.lock_timeout(Duration::from_secs(3)).await;
            // Not granted. A partition cuts off the holder only: the
            // competitor finds the lock held. The other faults put the
            // majority out of everyone's reach, and the wait says so.
            let expected = match kind {
                RefreshFailure::Partition => matches!(waited, Err(Error::Timeout)),
                _ => matches!(waited, Err(Error::QuorumUnavailable { .. })),
            };
            assert!(
                expected,
                "seed {seed}: a competitor got {waited:?} during {ctx}"
            );
            kind.set(&cluster, &majority, false);
            // Long enough that a loss would have been declared by now.
            sleep(Duration::from_secs(90)).await;
            assert_held(&held, &other, &format!("after {ctx} ended"), seed).await;
            assert_eq!(
                nodes_holding(&cluster, held.uid(), held.resources()),
                first(n),
                "seed {seed}: refreshes did not reach every node again after {ctx}"
            );
            assert!(!lost.is_finished(), "seed {seed}: lost() fired after {ctx}");
            assert_eq!(held.unlock().await, Ok(()), "seed {seed}: {ctx}");
            lost.abort();
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_single_node_restart_does_not_cost_the_lock() {
    let seed = SEED + 100;
    let (cluster, held, other, t0) = held_lock(5, LockMode::Write, seed).await;
    sleep_until(t0 + Duration::from_secs(25)).await;
    cluster.restart(&[0]).unwrap();
    let restarted = Instant::now();
    assert!(
        cluster.lockers()[0].snapshot().is_empty(),
        "seed {seed}: a restart keeps the table"
    );
    sleep_until(restarted + cluster.lockers()[0].config().quarantine).await;
    sleep(Duration::from_secs(1)).await;
    assert!(!cluster.lockers()[0].is_quarantined(), "seed {seed}");
    let entries = cluster.lockers()[0].snapshot();
    assert!(
        entries.len() == 1
            && entries[0].uid == held.uid()
            && entries[0].acquired > restarted
            && entries[0].acquired <= restarted + lease().refresh_interval,
        "seed {seed}: the next refresh should have re-granted the lock on the \
         restarted node: {entries:?}"
    );
    assert_held(&held, &other, "after a single node restart", seed).await;
    assert_eq!(held.unlock().await, Ok(()), "seed {seed}");
}
