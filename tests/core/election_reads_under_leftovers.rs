//! What `leader()` and observers report when lockers keep values that are
//! not on a write quorum: a proclamation that reached fewer lockers than
//! a write quorum, and a resigned leader's copies on a minority of five.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use crate::election_support::{
    campaign_won, client, leader_on, loses_proclamations, reports_within,
};
use quorum_lock::testing::{CallKind, Latency, Relay, Route, TestCluster};
use quorum_lock::{Error, NetLocker};
use tokio::time::{sleep, timeout, Instant};

/// A leader's second proclamation reaches node 2 only (its link to nodes
/// 0 and 1 drops proclamations, its refreshes still arrive), so
/// `proclaim` fails. docs/election.md promises that every value reported
/// "was on a write quorum of lockers when read": the new value, on one
/// locker of three, must not be reported by `leader()` or an observer,
/// also when node 2 answers first.
#[tokio::test(start_paused = true)]
async fn a_value_on_one_locker_of_three_is_not_reported_as_the_leaders() {
    let cluster = Arc::new(TestCluster::new(3, 21));
    let cut = Arc::new(AtomicBool::new(false));
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| match i {
            2 => l,
            _ => loses_proclamations(l, cut.clone()),
        })
        .collect();
    let a = common::seeded(lockers, "a", 7);
    let w = client(&cluster, "watcher");
    let watch = w.election("jobs").unwrap();
    let mut leading = campaign_won(&a, b"first").await;
    let mut observer = watch.observe().unwrap();
    let first = observer.recv().await.flatten().expect("the leader");
    assert_eq!(&first.value[..], b"first");

    cut.store(true, Ordering::SeqCst);
    let failed = leading.proclaim(&b"second"[..]).await;
    assert!(
        matches!(failed, Err(Error::QuorumUnavailable { .. })),
        "{failed:?}"
    );
    let on: Vec<bool> = {
        let mut on = Vec::new();
        for l in cluster.lockers() {
            on.push(
                leader_on(&**l, "jobs")
                    .await
                    .is_some_and(|p| &p.value[..] == b"second"),
            );
        }
        on
    };
    assert_eq!(on, [false, false, true], "only node 2 stores it");
    assert!(!leading.is_lost());
    // Node 2 answers reads first, as the watcher's nearest node would.
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(50)), &[0, 1])
        .unwrap();

    let read = watch.leader().await.unwrap().expect("a leader");
    let reported = reports_within(&mut observer, Duration::from_secs(5)).await;
    assert!(
        &read.value[..] == b"first" && reported.is_empty(),
        "reported a value stored on 1 of 3 lockers: leader() = {:?} (term {}, seq {}), \
         observer = {:?}",
        String::from_utf8_lossy(&read.value),
        read.term,
        read.seq,
        reported
            .iter()
            .map(|l| l.as_ref().map(|l| (
                l.term,
                l.seq,
                String::from_utf8_lossy(&l.value).into_owned()
            )))
            .collect::<Vec<_>>()
    );
}

/// Five lockers: a resign confirmed by nodes 0, 1 and 2 while the leader's
/// links to nodes 3 and 4 were cut leaves its value on two lockers, one
/// short of a write quorum, and those two answer first. `leader()` says
/// nobody leads (or that it cannot tell), never the resigned leader, and
/// an observer that said "no leader" never goes back to it.
#[tokio::test(start_paused = true)]
async fn a_resigned_leaders_copies_on_two_of_five_lockers_are_never_reported() {
    let cluster = Arc::new(TestCluster::new(5, 22));
    let (a, w) = (client(&cluster, "a"), client(&cluster, "watcher"));
    let watch = w.election("jobs").unwrap();
    let mut observer = watch.observe().unwrap();
    assert_eq!(observer.recv().await, Some(None));
    let mut leading = campaign_won(&a, b"a").await;
    let term = leading.term();
    let seen = observer.recv().await.flatten().expect("the leader");
    assert_eq!(seen.term, term);

    cluster.partition("a", &[3, 4]).unwrap();
    leading.resign().await.expect("nodes 0, 1 and 2 confirm");
    for i in [3, 4] {
        assert!(leader_on(&*cluster.lockers()[i], "jobs").await.is_some());
    }
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(50)), &[0, 1, 2])
        .unwrap();
    for _ in 0..20 {
        match watch.leader().await {
            Ok(None) | Err(Error::LeaderUnsettled { .. }) => {}
            Ok(Some(l)) => panic!("leader() after a confirmed resign: term {}", l.term),
            Err(err) => panic!("unexpected error {err}"),
        }
        sleep(Duration::from_secs(2)).await;
    }
    let reported = reports_within(&mut observer, Duration::from_secs(10)).await;
    assert!(
        reported.iter().all(Option::is_none),
        "reported after the resign: {reported:?}"
    );
}

/// `inner` through a link whose answers to leader reads come back `delay`
/// late.
fn slow_leader_replies(inner: Arc<dyn NetLocker>, delay: Duration) -> Arc<dyn NetLocker> {
    Arc::new(Relay::new(inner, move |kind, _| match kind {
        CallKind::Leader => Route::SlowReply(delay),
        _ => Route::Forward,
    }))
}

/// A leader proclaims a new value every 100 ms for 10 s, while every
/// locker's answers reach the watcher 150 ms late: each proclamation
/// pushes a change to the observer while its read still waits for
/// answers. The observer still reports the leader's values as they change
/// (no silence longer than 2 s), rather than starting its read again on
/// every push and reporting nothing until the changes stop.
#[tokio::test(start_paused = true)]
async fn an_observer_keeps_reporting_while_values_change_faster_than_its_reads() {
    let cluster = Arc::new(TestCluster::new(3, 23));
    let a = client(&cluster, "a");
    let far: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .map(|l| slow_leader_replies(l, Duration::from_millis(150)))
        .collect();
    let w = common::seeded(far, "watcher", 7);
    let mut leading = campaign_won(&a, b"v0").await;
    let watch = w.election("jobs").unwrap();
    let mut observer = watch.observe().unwrap();
    assert!(observer.recv().await.flatten().is_some());
    let proclaiming = tokio::spawn(async move {
        for i in 1..=100u32 {
            leading
                .proclaim(format!("v{i}").into_bytes())
                .await
                .unwrap();
            sleep(Duration::from_millis(100)).await;
        }
        leading
    });
    let mut gaps = Vec::new();
    let mut last = Instant::now();
    let end = Instant::now() + Duration::from_secs(8);
    while Instant::now() < end {
        match timeout(end - Instant::now(), observer.recv()).await {
            Ok(Some(Some(_))) => {
                gaps.push(last.elapsed());
                last = Instant::now();
            }
            Ok(other) => panic!("unexpected {other:?}"),
            Err(_) => break,
        }
    }
    gaps.push(last.elapsed());
    let _ = proclaiming.await;
    let longest = gaps.iter().max().copied().unwrap_or_default();
    assert!(
        longest <= Duration::from_secs(2),
        "the observer reported {} values in 8 s while the leader proclaimed one every 100 ms; \
         longest silence {longest:?}",
        gaps.len() - 1
    );
}
