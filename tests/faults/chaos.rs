#![cfg(feature = "testing")]
//! Ports of dsync's chaos scenarios: too few servers, servers going down
//! under a held lock, stale locks, crashed readers, and writer starvation.
//! A client that crashes while holding a lock is covered by
//! `tests/holder_crash.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::harness::{client, instant_of, lease, Seeded};
use quorum_lock::testing::TestCluster;
use quorum_lock::{Error, LockArgs, NetLocker, WaitReason};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::{sleep, sleep_until, timeout, Instant};

const SEED: u64 = 61;
const RESOURCE: &str = "chaos";
/// Bounds every wait that should end, so that a regression fails instead
/// of polling forever.
const PATIENCE: Duration = Duration::from_secs(600);

fn all(n: usize) -> Vec<usize> {
    (0..n).collect()
}

#[tokio::test(start_paused = true)]
async fn too_few_servers_for_a_quorum() {
    let seed = SEED;
    let cluster = TestCluster::new(5, seed);
    let ds = client(&cluster, "client", seed);
    let mutex = ds.rw_mutex([RESOURCE]).unwrap();
    cluster.crash(&[0, 1, 2]).unwrap();

    let start = Instant::now();
    let waited = mutex.lock_timeout(Duration::from_secs(5)).await;
    // Not `Timeout`: the wait says that too few servers were reachable,
    // and which.
    let crashed: Vec<String> = cluster.lockers()[..3]
        .iter()
        .map(|l| l.endpoint())
        .collect();
    let names = |err: &Option<Error>| match err {
        Some(Error::QuorumUnavailable {
            answered: 2,
            quorum: 3,
            lockers: 5,
            unreachable,
        }) => unreachable.iter().map(|u| u.endpoint.clone()).collect(),
        _ => Vec::new(),
    };
    let waited = waited.err();
    assert_eq!(names(&waited), crashed, "seed {seed}: {waited:?}");
    assert_eq!(start.elapsed(), Duration::from_secs(5), "seed {seed}");
    for once in [mutex.try_lock().await.err(), mutex.try_read().await.err()] {
        assert_eq!(names(&once), crashed, "seed {seed}: {once:?}");
    }

    // Servers that come back stay unavailable for new grants until their
    // quarantine ends, and a wait says so, with the time left.
    cluster.restart(&[0, 1, 2]).unwrap();
    let restarted = Instant::now();
    let quarantine = cluster.lockers()[0].config().quarantine;
    let once = mutex.try_lock().await;
    assert!(
        matches!(&once, Err(Error::Quarantined { quarantined, left: Some(left), quorum: 3, lockers: 5 })
            if *quarantined == crashed && *left <= quarantine && *left + Duration::from_secs(1) >= quarantine),
        "seed {seed}: {once:?}"
    );
    let short = mutex.lock_timeout(Duration::from_secs(1)).await;
    assert!(
        matches!(short, Err(Error::Quarantined { .. })),
        "seed {seed}: {short:?}"
    );
    let waiter = mutex.clone();
    let wait = tokio::spawn(async move { waiter.lock_timeout(PATIENCE).await });
    sleep(Duration::from_secs(2)).await;
    let status = mutex.waiting().expect("the wait reports");
    assert_eq!(
        status.reason(),
        WaitReason::Quarantine,
        "seed {seed}: {status}"
    );
    let left = status.quarantine_left().expect("the servers said");
    assert!(
        left + restarted.elapsed() <= quarantine + Duration::from_secs(1),
        "seed {seed}: {status}"
    );
    assert!(
        status
            .to_string()
            .contains("3 of 5 lockers are in quarantine"),
        "{status}"
    );
    let guard = wait
        .await
        .expect("the wait ends")
        .seeded(seed, "lock after quarantine");
    let after = restarted.elapsed();
    assert!(
        after >= quarantine && after <= quarantine + Duration::from_secs(2),
        "seed {seed}: granted {after:?} after the restart"
    );
    guard.unlock().await.seeded(seed, "unlock");
}

#[tokio::test(start_paused = true)]
async fn servers_going_down_while_a_lock_is_held() {
    let seed = SEED + 1;
    let cluster = TestCluster::new(5, seed);
    let holder = client(&cluster, "holder", seed);
    let other = client(&cluster, "other", seed + 1)
        .rw_mutex([RESOURCE])
        .unwrap();
    let t0 = Instant::now();
    let guard = holder
        .rw_mutex([RESOURCE])
        .unwrap()
        .try_lock()
        .await
        .seeded(seed, "lock");
    let lost = instant_of(guard.lost());

    // A minority down for far longer than the validity: nothing happens.
    sleep_until(t0 + Duration::from_secs(25)).await;
    cluster.crash(&[3, 4]).unwrap();
    sleep(Duration::from_secs(300)).await;
    assert!(!guard.is_lost(), "seed {seed}: lost with a minority down");
    assert_eq!(
        other.try_lock().await.err(),
        Some(Error::WouldBlock),
        "seed {seed}"
    );
    cluster.restart(&[3, 4]).unwrap();

    // Then a majority, for longer than validity - safety_margin: the
    // holder must be told, within the trust window of its last refresh.
    sleep_until(t0 + Duration::from_secs(425)).await;
    cluster.crash(&[0, 1, 2]).unwrap();
    let crashed = Instant::now();
    let lost_at = timeout(Duration::from_secs(120), lost)
        .await
        .unwrap_or_else(|_| panic!("seed {seed}: loss not signalled"))
        .seeded(seed, "loss signal");
    let after = lost_at - crashed;
    let trusted = lease().trusted_for();
    assert!(
        after <= trusted && after + lease().refresh_interval >= trusted,
        "seed {seed}: loss signalled {after:?} after the crash"
    );
    assert!(guard.is_lost(), "seed {seed}");
    assert_eq!(guard.unlock().await, Err(Error::LockLost), "seed {seed}");
}

/// An entry nobody refreshes, as a holder that crashed long ago leaves.
fn stale(uid: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec![RESOURCE.to_string()].into(),
        owner: "ghost".into(),
        source: "tests/chaos.rs".into(),
        quorum: 3,
    }
}

#[tokio::test(start_paused = true)]
async fn stale_locks_expire() {
    let seed = SEED + 2;
    let cluster = TestCluster::new(5, seed);
    let ds = client(&cluster, "client", seed);
    let mutex = ds.rw_mutex([RESOURCE]).unwrap();

    // On a minority a stale entry blocks nothing.
    for node in &cluster.lockers()[..2] {
        assert!(node
            .lock(&stale("stale-minority"))
            .await
            .seeded(seed, "plant"));
    }
    let guard = mutex
        .try_lock()
        .await
        .seeded(seed, "lock past a minority's stale entry");
    guard.unlock().await.seeded(seed, "unlock");
    // The minority's leftover cannot be released by anyone but its expiry.
    sleep(lease().validity).await;
    assert_eq!(cluster.total_entries(), 0, "seed {seed}");

    let planted = Instant::now();
    for node in &cluster.lockers()[..3] {
        assert!(node
            .lock(&stale("stale-majority"))
            .await
            .seeded(seed, "plant"));
    }
    assert_eq!(cluster.total_entries(), 3, "seed {seed}");
    assert_eq!(
        mutex.try_lock().await.err(),
        Some(Error::WouldBlock),
        "seed {seed}"
    );
    let guard = mutex
        .lock_timeout(PATIENCE)
        .await
        .seeded(seed, "lock past a stale entry");
    let waited = planted.elapsed();
    assert!(
        waited >= lease().validity && waited <= lease().validity + Duration::from_secs(2),
        "seed {seed}: the stale lock blocked for {waited:?}"
    );
    guard.unlock().await.seeded(seed, "unlock");
}

/// `FaultyLocker` forwards every call but `NetLocker::locks`, so it answers
/// with the trait's default "cannot list", and `Dsync::locks()` on a
/// `TestCluster` fails with `QuorumUnavailable { answered: 0, .. }` even with
/// no fault injected. Operators' stale-lock listings cannot be tested through
/// the harness.
#[tokio::test(start_paused = true)]
async fn a_stale_lock_shows_in_the_cluster_listing() {
    let cluster = TestCluster::new(5, SEED + 5);
    for node in &cluster.lockers()[..3] {
        assert!(node.lock(&stale("stale-majority")).await.unwrap());
    }
    let ds = client(&cluster, "operator", SEED + 5);
    let listed = ds
        .locks()
        .await
        .expect("listing through the fault injectors");
    assert_eq!(
        (listed.len(), listed[0].uid.as_str(), listed[0].nodes),
        (1, "stale-majority", 3)
    );
}

#[tokio::test(start_paused = true)]
async fn two_crashed_readers_then_a_writer() {
    let seed = SEED + 3;
    let cluster = TestCluster::new(5, seed);
    let owners = ["reader-1", "reader-2"];
    let t0 = Instant::now();
    let mut guards = Vec::new();
    for (i, owner) in owners.into_iter().enumerate() {
        let ds = client(&cluster, owner, seed + i as u64);
        guards.push(
            ds.rw_mutex([RESOURCE])
                .unwrap()
                .try_read()
                .await
                .seeded(seed, "read"),
        );
    }
    let tokens: Vec<_> = guards.iter().map(|g| g.loss_token()).collect();
    // Both processes die between two refreshes.
    sleep_until(t0 + Duration::from_secs(25)).await;
    for (guard, owner) in guards.into_iter().zip(owners) {
        std::mem::forget(guard);
        cluster.partition(owner, &all(5)).unwrap();
    }
    let crashed = Instant::now();
    let writer = client(&cluster, "writer", seed + 9);
    let guard = writer
        .rw_mutex([RESOURCE])
        .unwrap()
        .lock_timeout(PATIENCE)
        .await
        .seeded(seed, "writer");
    let waited = crashed.elapsed();
    let (validity, interval) = (lease().validity, lease().refresh_interval);
    assert!(
        waited + interval >= validity && waited <= validity + interval,
        "seed {seed}: the writer waited {waited:?} after the readers crashed"
    );
    assert!(tokens.iter().all(|t| t.is_cancelled()), "seed {seed}");
    guard.unlock().await.seeded(seed, "unlock");
}

/// Readers that keep overlapping their read locks no longer starve a
/// writer (they did while waiting was by polling: 253 refused writer rounds
/// in 120 s). Once the writer waits in line, readers that come after it
/// queue behind it, so it gets the lock as soon as the readers already
/// holding let go: within the longest read hold, 4 s here.
#[tokio::test(start_paused = true)]
async fn overlapping_readers_do_not_starve_a_waiting_writer() {
    let seed = SEED + 4;
    let cluster = Arc::new(TestCluster::new(5, seed));
    let t0 = Instant::now();
    let readers_stop = t0 + Duration::from_secs(60);
    let reads = Arc::new(AtomicUsize::new(0));
    let mut readers = Vec::new();
    for r in 0..3u64 {
        let ds = client(&cluster, &format!("reader-{r}"), seed + r);
        let reads = reads.clone();
        readers.push(tokio::spawn(async move {
            let mut rng = SmallRng::seed_from_u64(seed * 100 + r);
            let mutex = ds.rw_mutex([RESOURCE]).unwrap();
            sleep(Duration::from_secs(r)).await;
            while Instant::now() < readers_stop {
                let guard = mutex
                    .read_timeout(Duration::from_secs(30))
                    .await
                    .seeded(seed, "read");
                reads.fetch_add(1, Ordering::Relaxed);
                sleep(Duration::from_millis(rng.random_range(2_000..4_000))).await;
                guard.unlock().await.seeded(seed, "read unlock");
            }
        }));
    }
    let writer = client(&cluster, "writer", seed + 9);
    let mutex = writer.rw_mutex([RESOURCE]).unwrap();
    for turn in 0..5 {
        sleep(Duration::from_secs(5)).await;
        let asked = Instant::now();
        let guard = mutex
            .lock_timeout(Duration::from_secs(30))
            .await
            .seeded(seed, "writer");
        let waited = asked.elapsed();
        assert!(
            waited <= Duration::from_millis(4_010),
            "seed {seed}: turn {turn}: the writer waited {waited:?} behind readers that hold at most 4 s"
        );
        sleep(Duration::from_millis(500)).await;
        guard.unlock().await.seeded(seed, "unlock");
    }
    for reader in readers {
        reader.await.seeded(seed, "reader");
    }
    let reads = reads.load(Ordering::Relaxed);
    assert!(reads > 30, "seed {seed}: only {reads} reads");
}
