//! Unit tests of `FaultyLocker`: each fault, its healing, and determinism.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{sleep, timeout, Instant};

use super::{CallKind, FaultyLocker, Latency};
use crate::{Error, LocalLocker, LockArgs, LockMode, NetLocker};

const PATIENCE: Duration = Duration::from_secs(10);

fn args(uid: &str, owner: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec!["x".to_string()].into(),
        owner: owner.into(),
        source: "test".into(),
        quorum: 1,
    }
}

fn node(seed: u64) -> (Arc<FaultyLocker>, Arc<LocalLocker>) {
    let table = Arc::new(LocalLocker::named("n"));
    (Arc::new(FaultyLocker::local(table.clone(), seed)), table)
}

/// `None` when the call did not answer within `PATIENCE` of virtual time.
async fn answer(node: &FaultyLocker, args: &LockArgs) -> Option<Result<bool, Error>> {
    timeout(PATIENCE, node.lock(args)).await.ok()
}

#[tokio::test(start_paused = true)]
async fn fixed_latency_delays_by_exactly_that() {
    let (node, table) = node(1);
    node.set_latency(Latency::Fixed(Duration::from_millis(50)));
    let t0 = Instant::now();
    assert_eq!(node.lock(&args("u", "c")).await, Ok(true));
    assert_eq!(t0.elapsed(), Duration::from_millis(50));
    assert_eq!(table.snapshot().len(), 1);
    assert_eq!(node.stats(CallKind::Lock).delayed, 1);
    assert_eq!(node.stats(CallKind::Lock).faulted, 0);
}

#[tokio::test(start_paused = true)]
async fn uniform_latency_stays_in_range_and_replays_per_seed() {
    let (lo, hi) = (Duration::from_millis(10), Duration::from_millis(30));
    let delays = |seed| async move {
        let (node, _) = node(seed);
        // Bounds in either order mean the same range.
        node.set_latency(Latency::Uniform { min: hi, max: lo });
        let mut out = Vec::new();
        for i in 0..20 {
            let t0 = Instant::now();
            let _ = node.lock(&args(&format!("u{i}"), "c")).await;
            out.push(t0.elapsed());
        }
        out
    };
    let a = delays(5).await;
    assert!(
        a.iter()
            .all(|d| (lo..=hi + Duration::from_millis(1)).contains(d)),
        "{a:?}"
    );
    assert_eq!(a, delays(5).await);
    assert_ne!(a, delays(6).await);
}

#[tokio::test(start_paused = true)]
async fn lost_reply_is_applied_or_not_and_never_answers() {
    for applied in [true, false] {
        let (node, table) = node(2);
        node.drop_replies(1.0, applied).unwrap();
        assert_eq!(answer(&node, &args("u", "c")).await, None);
        assert_eq!(table.snapshot().len(), usize::from(applied));
        assert_eq!(node.stats(CallKind::Lock).faulted, 1);
        node.drop_replies(0.0, applied).unwrap();
        // A retry under another uid is refused only if the lost one applied.
        assert_eq!(answer(&node, &args("v", "c")).await, Some(Ok(!applied)));
    }
}

#[tokio::test(start_paused = true)]
async fn drop_probability_is_checked_and_drops_about_that_often() {
    let (node, _) = node(3);
    for bad in [-0.1, 1.5, f64::NAN] {
        assert!(matches!(
            node.drop_replies(bad, true),
            Err(Error::InvalidArgument(_))
        ));
    }
    node.drop_replies(0.3, true).unwrap();
    for i in 0..200 {
        let _ = timeout(
            Duration::from_millis(1),
            node.rlock(&args(&format!("u{i}"), "c")),
        )
        .await;
    }
    let lost = node.stats(CallKind::RLock).faulted;
    assert!((30..90).contains(&lost), "lost {lost} of 200 at p = 0.3");
}

#[tokio::test(start_paused = true)]
async fn refuse_fails_at_once_until_healed() {
    let (node, table) = node(4);
    node.set_refuse(true);
    let t0 = Instant::now();
    let err = node.lock(&args("u", "c")).await.unwrap_err();
    assert!(
        matches!(&err, Error::LockerUnavailable { endpoint, .. } if endpoint == "n"),
        "{err}"
    );
    assert_eq!(t0.elapsed(), Duration::ZERO);
    assert!(table.snapshot().is_empty());
    node.set_refuse(false);
    assert_eq!(node.lock(&args("u", "c")).await, Ok(true));
}

#[tokio::test(start_paused = true)]
async fn hang_neither_applies_nor_answers() {
    let (node, table) = node(5);
    node.set_hang(true);
    assert_eq!(answer(&node, &args("u", "c")).await, None);
    assert!(table.snapshot().is_empty());
    node.heal();
    assert_eq!(answer(&node, &args("u", "c")).await, Some(Ok(true)));
}

#[tokio::test(start_paused = true)]
async fn partition_cuts_only_the_named_clients() {
    let (node, _) = node(6);
    node.partition("a");
    node.partition("b");
    assert_eq!(node.partitioned_owners(), ["a", "b"]);
    assert_eq!(answer(&node, &args("u1", "a")).await, None);
    assert_eq!(answer(&node, &args("u2", "b")).await, None);
    assert_eq!(answer(&node, &args("u3", "c")).await, Some(Ok(true)));
    assert!(node.heal_partition("a"));
    assert!(!node.heal_partition("a"));
    assert_eq!(node.partitioned_owners(), ["b"]);
    assert!(node.unlock(&args("u3", "a")).await.unwrap());
    node.heal_partitions();
    assert_eq!(answer(&node, &args("u4", "b")).await, Some(Ok(true)));
}

#[tokio::test(start_paused = true)]
async fn crash_hangs_and_restart_wipes_into_quarantine() {
    let (node, table) = node(7);
    assert_eq!(node.lock(&args("u", "c")).await, Ok(true));
    node.crash();
    assert!(node.is_down() && !node.is_online());
    assert_eq!(answer(&node, &args("v", "c")).await, None);
    assert_eq!(table.snapshot().len(), 1);
    node.restart();
    assert!(node.is_online() && table.is_quarantined() && table.snapshot().is_empty());
    let refused = node.lock(&args("v", "c")).await;
    assert!(
        matches!(refused, Err(Error::LockerUnavailable { .. })),
        "{refused:?}"
    );
    // The holder's refresh re-creates its entry only if the mode arrives,
    // and answers the quarantine either way.
    assert!(node
        .refresh(&args("u", "c"))
        .await
        .is_err_and(|e| e.is_quarantine()));
    assert!(table.snapshot().is_empty());
    assert!(node
        .refresh_mode(&args("u", "c"), LockMode::Write)
        .await
        .is_err_and(|e| e.is_quarantine()));
    assert_eq!(table.snapshot()[0].mode, LockMode::Write);
}

#[tokio::test(start_paused = true)]
async fn crash_silences_calls_waiting_in_latency() {
    let (node, table) = node(8);
    node.set_latency(Latency::Fixed(Duration::from_millis(100)));
    let call = tokio::spawn({
        let node = node.clone();
        async move { node.lock(&args("u", "c")).await }
    });
    sleep(Duration::from_millis(50)).await;
    node.crash();
    node.restart();
    sleep(Duration::from_secs(1)).await;
    assert!(!call.is_finished());
    assert!(
        table.snapshot().is_empty(),
        "a crashed host applied a request"
    );
    assert_eq!(node.stats(CallKind::Lock).faulted, 1);
}

#[tokio::test(start_paused = true)]
async fn a_call_keeps_the_decision_it_started_with() {
    let (node, _) = node(9);
    node.set_latency(Latency::Fixed(Duration::from_millis(100)));
    let call = tokio::spawn({
        let node = node.clone();
        async move { node.lock(&args("u", "c")).await }
    });
    sleep(Duration::from_millis(50)).await;
    node.set_refuse(true);
    assert_eq!(call.await.unwrap(), Ok(true));
}

#[tokio::test(start_paused = true)]
async fn generic_wrapper_forwards_the_mode_and_restarts_without_wiping() {
    let (inner, table) = node(10);
    let outer = FaultyLocker::new(inner.clone(), 11);
    assert!(outer.local_locker().is_none() && outer.is_local());
    assert_eq!(outer.endpoint(), "n");
    assert_eq!(outer.lock(&args("u", "c")).await, Ok(true));
    outer.crash();
    outer.restart();
    assert_eq!(table.snapshot().len(), 1);
    inner.restart();
    assert!(outer
        .refresh_mode(&args("u", "c"), LockMode::Write)
        .await
        .is_err_and(|e| e.is_quarantine()));
    assert_eq!(table.snapshot().len(), 1, "the mode reached the table");
}

#[tokio::test(start_paused = true)]
async fn heal_clears_everything_and_restarts_a_crashed_node() {
    let (node, table) = node(12);
    node.set_latency(Latency::Fixed(Duration::from_secs(1)));
    node.drop_replies(1.0, false).unwrap();
    node.set_refuse(true);
    node.set_hang(true);
    node.partition("c");
    node.crash();
    node.heal();
    assert!(!node.is_down() && table.is_quarantined());
    assert_eq!(node.latency(), Latency::None);
    assert!(node.partitioned_owners().is_empty());
    let t0 = Instant::now();
    assert_eq!(node.unlock(&args("u", "c")).await, Ok(false));
    assert_eq!(t0.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn counters_count_every_kind() {
    let (node, _) = node(13);
    let a = args("u", "c");
    let _ = node.lock(&a).await;
    let _ = node.refresh(&a).await;
    let _ = node.refresh_mode(&a, LockMode::Write).await;
    let _ = node.unlock(&a).await;
    let _ = node.rlock(&a).await;
    let _ = node.runlock(&a).await;
    let _ = node.leader(&a, None).await;
    node.set_refuse(true);
    let _ = node.force_unlock(&a).await;
    let _ = node
        .proclaim(&a, &crate::Proclamation::new(1, 0, &b"v"[..]).unwrap())
        .await;
    let seen: Vec<u64> = CallKind::ALL.iter().map(|&k| node.stats(k).seen).collect();
    assert_eq!(seen, [1, 1, 1, 1, 2, 1, 0, 1, 1]);
    assert_eq!(node.stats(CallKind::ForceUnlock).faulted, 1);
    assert_eq!(node.stats(CallKind::Proclaim).faulted, 1);
    assert_eq!(node.total_stats().seen, 9);
    assert_eq!(node.total_stats().faulted, 2);
}

#[tokio::test(start_paused = true)]
async fn same_seed_same_calls_same_faults() {
    let run = |seed| async move {
        let (node, _) = node(seed);
        let (lo, hi) = (Duration::ZERO, Duration::from_millis(40));
        node.set_latency(Latency::Uniform { min: lo, max: hi });
        node.drop_replies(0.4, true).unwrap();
        let mut trace = Vec::new();
        for i in 0..100 {
            let t0 = Instant::now();
            let out = timeout(
                Duration::from_millis(50),
                node.lock(&args(&format!("u{i}"), "c")),
            )
            .await;
            trace.push((out.is_ok(), t0.elapsed()));
        }
        trace
    };
    assert_eq!(run(21).await, run(21).await);
    assert_ne!(run(21).await, run(22).await);
}

#[test]
fn a_calm_node_answers_at_once_and_a_faulted_one_only_through_futures() {
    let (node, table) = node(3);
    let now = node.immediate().expect("a calm node over a LocalLocker");
    assert_eq!(now.lock_now(&args("u", "c"), LockMode::Write), Ok(true));
    assert_eq!(table.snapshot().len(), 1);
    assert_eq!(node.stats(CallKind::Lock).seen, 1);
    // While a fault is in force, every call takes the async path, where
    // the fault can delay or swallow it.
    node.set_latency(Latency::Fixed(Duration::from_millis(5)));
    assert!(node.immediate().is_none(), "latency");
    node.set_latency(Latency::None);
    node.partition("c");
    assert!(node.immediate().is_none(), "a partition");
    node.heal_partitions();
    node.crash();
    assert!(node.immediate().is_none(), "a crash");
    node.restart();
    assert!(node.immediate().is_some(), "restarted and calm again");
}

#[test]
fn a_fault_that_begins_after_the_immediate_path_was_chosen_fails_the_call_unapplied() {
    let (node, table) = node(4);
    let now = node.immediate().expect("calm");
    node.crash();
    let err = now
        .lock_now(&args("u", "c"), LockMode::Write)
        .expect_err("the node crashed");
    assert!(err.is_retryable(), "{err}");
    assert!(table.snapshot().is_empty(), "the call reached the table");
    assert_eq!(node.stats(CallKind::Lock).faulted, 1);
}
