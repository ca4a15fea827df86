#![cfg(feature = "testing")]
//! A majority of lock servers restarting at once forgets every lock. Restart
//! quarantine (refuse new grants for a validity, vouch for nothing until it
//! ends, let holders re-create their entries by refreshing) keeps that from
//! letting a second holder in.

use std::sync::Arc;
use std::time::Duration;

use crate::harness::{client, instant_of, lease, nodes_holding, quorum, Seeded};
use quorum_lock::testing::{EventKind, History, TestCluster};
use quorum_lock::{DRWMutex, LockMode, LockerConfig, WriteGuard};
use tokio::task::JoinHandle;
use tokio::time::{sleep_until, timeout, Instant};

const SEED: u64 = 31;
const RESOURCE: &str = "table/users";
const PATIENCE: Duration = Duration::from_secs(600);

/// A client that polls for the lock from now on, for up to `PATIENCE`,
/// and records its grant.
fn contender(
    mutex: DRWMutex,
    history: Arc<History>,
    seed: u64,
) -> JoinHandle<(Instant, WriteGuard)> {
    tokio::spawn(async move {
        let guard = mutex
            .lock_timeout(PATIENCE)
            .await
            .seeded(seed, "second client");
        history.acquired(guard.uid(), guard.resources(), LockMode::Write);
        (Instant::now(), guard)
    })
}

struct Setup {
    cluster: TestCluster,
    history: Arc<History>,
    first: WriteGuard,
    second: JoinHandle<(Instant, WriteGuard)>,
    t0: Instant,
}

/// A first holder on `n` nodes and a second client already polling.
async fn setup(n: usize, config: LockerConfig, seed: u64) -> Setup {
    let cluster = TestCluster::with_config(n, seed, config);
    let history = Arc::new(History::new());
    let a = client(&cluster, "client-a", seed);
    let b = client(&cluster, "client-b", seed + 1);
    let t0 = Instant::now();
    let first = a
        .rw_mutex([RESOURCE])
        .unwrap()
        .try_lock()
        .await
        .seeded(seed, "first lock");
    history.acquired(first.uid(), first.resources(), LockMode::Write);
    let second = contender(b.rw_mutex([RESOURCE]).unwrap(), history.clone(), seed);
    Setup {
        cluster,
        history,
        first,
        second,
        t0,
    }
}

fn majority(n: usize) -> Vec<usize> {
    (0..quorum(n, LockMode::Write)).collect()
}

/// A restarted majority does not vouch for the lock during its quarantine
/// (its refreshes re-create the holder's entries but do not count), so the
/// holder is told it lost the lock once its trust runs out; nobody else is
/// granted it before the quarantine ends, and then only after the holder
/// was told.
#[tokio::test(start_paused = true)]
async fn a_majority_restart_lets_no_second_holder_in() {
    for n in [3, 5] {
        let seed = SEED + n as u64;
        let s = setup(n, LockerConfig::default(), seed).await;
        let restarted = majority(n);
        let lost = instant_of(s.first.lost());
        sleep_until(s.t0 + Duration::from_secs(25)).await;
        s.cluster.restart(&restarted).unwrap();
        let restart = Instant::now();
        let quarantine = s.cluster.lockers()[0].config().quarantine;
        sleep_until(s.t0 + Duration::from_secs(80)).await;

        assert!(
            s.first.is_lost(),
            "seed {seed}: n = {n}: a restarted majority kept vouching for the lock"
        );
        assert!(
            !s.second.is_finished(),
            "seed {seed}: n = {n}: a second holder got in during the quarantine"
        );
        assert_eq!(
            nodes_holding(&s.cluster, s.first.uid(), s.first.resources()),
            (0..n).collect::<Vec<_>>(),
            "seed {seed}: n = {n}: refreshes did not re-create the entries on the restarted nodes"
        );
        let lost_at = lost.await.expect("loss signal");
        s.history
            .record_at(lost_at, s.first.uid(), EventKind::LostSignalled);
        // The holder gives its entries back once told; the waiter gets in
        // when the quarantine is over.
        let (granted, second) = timeout(Duration::from_secs(60), s.second)
            .await
            .unwrap_or_else(|_| panic!("seed {seed}: n = {n}: no grant after the quarantine"))
            .seeded(seed, "second client");
        assert!(
            granted >= restart + quarantine && granted > lost_at,
            "seed {seed}: n = {n}: granted {:?} after the restart",
            granted - restart
        );
        if let Err(v) = s.history.check() {
            panic!("seed {seed}: n = {n}: {v}");
        }
        second.unlock().await.seeded(seed, "second unlock");
    }
}

#[tokio::test(start_paused = true)]
async fn after_a_release_the_next_grant_waits_for_the_quarantine_to_end() {
    for n in [3, 5] {
        let seed = SEED + 10 + n as u64;
        let s = setup(n, LockerConfig::default(), seed).await;
        let quarantine = s.cluster.lockers()[0].config().quarantine;
        sleep_until(s.t0 + Duration::from_secs(25)).await;
        s.cluster.restart(&majority(n)).unwrap();
        let restarted = Instant::now();
        sleep_until(s.t0 + Duration::from_secs(40)).await;
        s.history.released(s.first.uid());
        assert_eq!(s.first.unlock().await, Ok(()), "seed {seed}: n = {n}");

        let (granted, second) = s.second.await.seeded(seed, "second client");
        let after = granted - restarted;
        // The restarted majority refuses every new grant until its
        // quarantine ends; the waiter then gets in within one backoff.
        assert!(
            after >= quarantine && after <= quarantine + Duration::from_secs(2),
            "seed {seed}: n = {n}: granted {after:?} after the restart, quarantine {quarantine:?}"
        );
        if let Err(v) = s.history.check() {
            panic!("seed {seed}: n = {n}: {v}");
        }
        second.unlock().await.seeded(seed, "second unlock");
    }
}

/// Documents dsync's weakness that quarantine fixes: lock servers keep their
/// tables in memory, so a majority that restarts together forgets a held
/// lock and grants it again while its holder still believes it holds it.
#[tokio::test(start_paused = true)]
async fn without_quarantine_a_majority_restart_lets_a_second_holder_in() {
    let unsafe_config = LockerConfig {
        quarantine: Duration::ZERO,
        ..LockerConfig::default()
    };
    for n in [3, 5] {
        let seed = SEED + 20 + n as u64;
        let s = setup(n, unsafe_config, seed).await;
        let lost = instant_of(s.first.lost());
        sleep_until(s.t0 + Duration::from_secs(25)).await;
        s.cluster.restart(&majority(n)).unwrap();

        let (granted, second) = timeout(Duration::from_secs(5), s.second)
            .await
            .unwrap_or_else(|_| panic!("seed {seed}: n = {n}: no second grant after the restart"))
            .seeded(seed, "second client");
        // The first holder only finds out at its next refresh.
        let lost_at = timeout(Duration::from_secs(60), lost)
            .await
            .seeded(seed, "loss signal")
            .seeded(seed, "loss signal");
        s.history
            .record_at(lost_at, s.first.uid(), EventKind::LostSignalled);
        assert!(
            lost_at > granted
                && lost_at - s.t0 <= Duration::from_secs(30) + lease().refresh_interval,
            "seed {seed}: n = {n}: loss signalled {:?} after the second grant",
            lost_at.checked_duration_since(granted)
        );
        let v = s.history.check().expect_err(&format!(
            "seed {seed}: n = {n}: the checker missed the overlap"
        ));
        assert_eq!(
            (v.earlier.holder.as_str(), v.later.holder.as_str()),
            (s.first.uid(), second.uid()),
            "seed {seed}: n = {n}: {v}"
        );
        assert_eq!(v.until, Some(lost_at), "seed {seed}: n = {n}: {v}");
    }
}

/// Issue #21, break 1: one restart of one locker, no majority failure. A
/// waiter holds a grant on node 0 that the restart wipes; the holder's
/// refresh then re-creates *its* entry there, where the holder never had
/// one, and the waiter later completes its quorum on node 2 with the
/// forgotten grant. Both believed they held the lock for seconds.
///
/// A locker in quarantine must not vouch for anything: a refresh there
/// re-creates the entry but is not counted, and a waiter forgets a grant
/// whose locker answers that it restarted.
#[tokio::test(start_paused = true)]
async fn a_waiter_never_wins_with_a_grant_a_restarted_locker_forgot() {
    let seed = SEED + 40;
    let cluster = TestCluster::new(3, seed);
    let history = Arc::new(History::new());
    let x = client(&cluster, "client-x", seed);
    let y = client(&cluster, "client-y", seed + 1);
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);

    // X's request to node 0 is lost: X holds nodes 1 and 2.
    cluster.partition("client-x", &[0]).unwrap();
    let first = x
        .rw_mutex([RESOURCE])
        .unwrap()
        .try_lock()
        .await
        .seeded(seed, "first lock");
    history.acquired(first.uid(), first.resources(), LockMode::Write);
    cluster.heal_partition("client-x", &[0]).unwrap();
    let lost = instant_of(first.lost());

    // X's refresh at 10 s reaches node 2 for the last time.
    sleep_until(at(11)).await;
    cluster.partition("client-x", &[2]).unwrap();
    // Y waits; node 0 grants it (free there), node 2 queues it.
    sleep_until(at(21)).await;
    cluster.partition("client-y", &[1]).unwrap();
    let second = contender(y.rw_mutex([RESOURCE]).unwrap(), history.clone(), seed);
    sleep_until(at(24)).await;
    cluster.restart(&[0]).unwrap();

    // X's entry on node 2 expires at 70 s and node 2 grants Y.
    sleep_until(at(120)).await;
    if let Ok(Ok(lost_at)) = timeout(Duration::ZERO, lost).await {
        history.record_at(lost_at, first.uid(), EventKind::LostSignalled);
    }
    if let Err(v) = history.check() {
        panic!("seed {seed}: two writers held {RESOURCE} at once: {v}");
    }
    drop(second);
}
