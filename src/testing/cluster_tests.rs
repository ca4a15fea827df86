//! Unit tests of `TestCluster`, and the whole harness driving a `Dsync`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::{sleep, Instant};

use super::{CallKind, CallStats, EventKind, History, Latency, TestCluster};
use crate::{Dsync, Error, LockMode, LockerConfig, NetLocker};

const OWNER: &str = "tester";

fn dsync(cluster: &TestCluster, seed: u64) -> Dsync {
    Dsync::builder(cluster.net_lockers())
        .owner(OWNER)
        .rng_seed(seed)
        .build()
        .unwrap()
}

/// Virtual time one call to each node takes under a shared uniform latency.
async fn delays(cluster: &TestCluster) -> Vec<Duration> {
    let (min, max) = (Duration::ZERO, Duration::from_secs(1));
    cluster
        .set_latency(Latency::Uniform { min, max }, &[0, 1, 2])
        .unwrap();
    let mut out = Vec::new();
    for node in cluster.nodes() {
        let args = crate::LockArgs {
            uid: "u".into(),
            resources: vec!["x".to_string()].into(),
            owner: OWNER.into(),
            source: "test".into(),
            quorum: 1,
        };
        let t0 = Instant::now();
        let _ = node.unlock(&args).await;
        out.push(t0.elapsed());
    }
    out
}

#[tokio::test(start_paused = true)]
async fn nodes_are_named_wired_and_seeded_apart() {
    let cluster = TestCluster::new(3, 9);
    assert_eq!((cluster.len(), cluster.is_empty()), (3, false));
    let names: Vec<String> = cluster.net_lockers().iter().map(|l| l.endpoint()).collect();
    assert_eq!(names, ["node-0", "node-1", "node-2"]);
    for (node, table) in cluster.nodes().iter().zip(cluster.lockers()) {
        assert!(Arc::ptr_eq(node.local_locker().unwrap(), table));
    }
    let a = delays(&cluster).await;
    assert!(a[0] != a[1] && a[1] != a[2], "nodes share a seed: {a:?}");
    assert_eq!(a, delays(&TestCluster::new(3, 9)).await);
    assert_ne!(a, delays(&TestCluster::new(3, 10)).await);
    assert!(TestCluster::new(0, 1).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_bad_index_changes_nothing() {
    let cluster = TestCluster::new(3, 1);
    let err = cluster.crash(&[0, 3]).unwrap_err();
    assert!(
        err.to_string().contains("node index 3 is out of range"),
        "{err}"
    );
    assert!(!cluster.nodes()[0].is_down());
    assert!(cluster.drop_replies(2.0, true, &[0]).is_err());
    assert!(cluster.set_refuse(true, &[7]).is_err());
}

#[tokio::test(start_paused = true)]
async fn a_faulty_minority_does_not_stop_locks() {
    let cluster = TestCluster::new(5, 2);
    let ds = dsync(&cluster, 2);
    cluster.crash(&[0]).unwrap();
    cluster.partition(OWNER, &[1]).unwrap();
    cluster.set_refuse(true, &[2]).unwrap();
    cluster.set_refuse(false, &[2]).unwrap();
    let guard = ds.rw_mutex(["a"]).unwrap().lock().await.unwrap();
    assert_eq!(cluster.total_entries(), 3);
    guard.unlock().await.unwrap();
    assert_eq!(cluster.total_entries(), 0);
    let locks = cluster.stats(CallKind::Lock);
    assert_eq!((locks.seen, locks.faulted), (5, 2));
}

#[tokio::test(start_paused = true)]
async fn a_majority_cut_off_makes_the_quorum_unavailable() {
    let cluster = TestCluster::new(5, 3);
    let ds = dsync(&cluster, 3);
    let mutex = ds.rw_mutex(["a"]).unwrap();
    cluster.partition(OWNER, &[0, 1, 2]).unwrap();
    cluster.partition("someone-else", &[3]).unwrap();
    let err = mutex.try_lock().await.unwrap_err();
    assert!(
        matches!(err, Error::QuorumUnavailable { answered: 2, .. }),
        "{err}"
    );
    cluster.heal_partition(OWNER, &[0, 1, 2]).unwrap();
    mutex.try_lock().await.unwrap().unlock().await.unwrap();
    cluster.set_hang(true, &[0, 1, 2]).unwrap();
    assert!(mutex.try_read().await.is_err());
    cluster.heal_all();
    mutex.try_read().await.unwrap().unlock().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_restarted_majority_refuses_new_grants() {
    let cluster = TestCluster::new(3, 4);
    let ds = dsync(&cluster, 4);
    let mutex = ds.rw_mutex(["a"]).unwrap();
    let _held = mutex.lock().await.unwrap();
    cluster.crash(&[0, 1]).unwrap();
    cluster.restart(&[0, 1]).unwrap();
    assert_eq!(cluster.total_entries(), 1);
    assert!(cluster.lockers()[..2].iter().all(|l| l.is_quarantined()));
    assert!(mutex.try_lock().await.is_err());
}

/// Holds a granted lock for a while, recording what its holder believes.
async fn hold(
    h: &History,
    uid: &str,
    resources: &[String],
    mode: LockMode,
    lost: impl Future<Output = ()>,
) {
    h.acquired(uid, resources, mode);
    tokio::select! {
        () = lost => h.lost_signalled(uid),
        () = sleep(Duration::from_millis(40)) => h.released(uid),
    }
}

/// Three workers take turns on two names through slow, lossy nodes, one of
/// which crashes and comes back. Returns the history and the call counts.
async fn contended_run(seed: u64) -> (Arc<History>, CallStats) {
    let cluster = Arc::new(TestCluster::new(5, seed));
    let ds = dsync(&cluster, seed);
    let slow = Latency::Uniform {
        min: Duration::ZERO,
        max: Duration::from_millis(30),
    };
    cluster.set_latency(slow, &[0, 1, 2, 3, 4]).unwrap();
    cluster.drop_replies(0.1, true, &[1]).unwrap();
    cluster.drop_replies(0.1, false, &[2]).unwrap();
    let history = Arc::new(History::new());
    let patience = Duration::from_secs(60);
    let workers: Vec<_> = (0..3)
        .map(|w| {
            let (ds, h) = (ds.clone(), history.clone());
            tokio::spawn(async move {
                let names: &[&str] = if w == 0 { &["a", "b"] } else { &["a"] };
                let mutex = ds.rw_mutex(names.iter().copied()).unwrap();
                for i in 0..5 {
                    if (w + i) % 3 == 0 {
                        let g = mutex.lock_timeout(patience).await.unwrap();
                        hold(&h, g.uid(), g.resources(), LockMode::Write, g.lost()).await;
                        let _ = g.unlock().await;
                    } else {
                        let g = mutex.read_timeout(patience).await.unwrap();
                        hold(&h, g.uid(), g.resources(), LockMode::Read, g.lost()).await;
                        let _ = g.unlock().await;
                    }
                }
            })
        })
        .collect();
    sleep(Duration::from_millis(100)).await;
    cluster.crash(&[4]).unwrap();
    sleep(Duration::from_millis(300)).await;
    cluster.restart(&[4]).unwrap();
    for worker in workers {
        worker.await.unwrap();
    }
    let calls = CallKind::ALL
        .iter()
        .map(|&k| cluster.stats(k))
        .fold(CallStats::default(), |a, b| a + b);
    (history, calls)
}

#[tokio::test(start_paused = true)]
async fn contended_runs_under_faults_stay_exclusive() {
    for seed in 0..10 {
        let (history, calls) = contended_run(seed).await;
        assert_eq!(history.len(), 30, "seed {seed}");
        assert!(
            calls.faulted > 0 && calls.delayed > 0,
            "seed {seed}: {calls:?}"
        );
        if let Err(v) = history.check() {
            panic!("seed {seed}: {v}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_same_seed_replays_the_same_run() {
    let shape = |h: &History| -> Vec<(Duration, bool)> {
        let events = h.events();
        let t0 = events.first().map(|e| e.at).unwrap();
        events
            .iter()
            .map(|e| (e.at - t0, e.kind == EventKind::Released))
            .collect()
    };
    let (a, calls_a) = contended_run(77).await;
    let (b, calls_b) = contended_run(77).await;
    assert_eq!((shape(&a), calls_a), (shape(&b), calls_b));
    let (c, calls_c) = contended_run(78).await;
    assert_ne!((shape(&a), calls_a), (shape(&c), calls_c));
}

#[tokio::test(start_paused = true)]
async fn the_checker_catches_a_majority_restart_without_quarantine() {
    let unsafe_config = LockerConfig {
        quarantine: Duration::ZERO,
        ..LockerConfig::default()
    };
    let cluster = TestCluster::with_config(5, 5, unsafe_config);
    let (ds, history) = (dsync(&cluster, 5), History::new());
    let mutex = ds.rw_mutex(["a"]).unwrap();
    let first = mutex.lock().await.unwrap();
    history.acquired(first.uid(), first.resources(), LockMode::Write);
    // A restart at the locker's creation instant still quarantines for 1 ns.
    sleep(Duration::from_millis(1)).await;
    cluster.restart(&[0, 1, 2]).unwrap();
    let second = mutex.try_lock().await.unwrap();
    history.acquired(second.uid(), second.resources(), LockMode::Write);
    let v = history.check().unwrap_err();
    assert_eq!(
        (v.earlier.holder.as_str(), v.later.holder.as_str()),
        (first.uid(), second.uid())
    );
    assert_eq!(
        (v.resources.as_slice(), v.until),
        (&["a".to_string()][..], None)
    );
}
