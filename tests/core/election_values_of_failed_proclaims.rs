//! Values of a leader's proclamations that failed, left on fewer lockers
//! than a write quorum: `leader()` and observers never report one. Two
//! failed proclaims in a row, on different lockers of five, must not add
//! up to a write quorum for the older of them.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use crate::election_support::{campaign_won, leader_on, loses_proclamations};
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Election, Error, Leader, Leadership, NetLocker, Observer};

/// The leader "a" over `lockers` (choices drawn from 7), its campaign in
/// "jobs" won with `first`, and the watcher's view of "jobs" through the
/// lockers of `cluster` (choices drawn from 8).
struct Scene {
    /// The clients, kept for as long as the test runs.
    _a: Dsync,
    _w: Dsync,
    watch: Election,
    leading: Leadership,
}

impl Scene {
    async fn new(cluster: &TestCluster, lockers: Vec<Arc<dyn NetLocker>>, first: &[u8]) -> Scene {
        let a = common::seeded(lockers, "a", 7);
        let w = common::seeded(cluster.net_lockers(), "watcher", 8);
        let watch = w.election("jobs").unwrap();
        let leading = campaign_won(&a, first).await;
        Scene {
            _a: a,
            _w: w,
            watch,
            leading,
        }
    }
}

/// The lockers of `cluster`, each behind a link that loses proclamations
/// while its cut (returned too, in the same order) is set.
fn each_losing_proclamations(
    cluster: &TestCluster,
) -> (Vec<Arc<AtomicBool>>, Vec<Arc<dyn NetLocker>>) {
    let links = cluster.net_lockers();
    let cuts: Vec<Arc<AtomicBool>> = links
        .iter()
        .map(|_| Arc::new(AtomicBool::new(false)))
        .collect();
    let lockers = links
        .into_iter()
        .zip(&cuts)
        .map(|(l, cut)| loses_proclamations(l, cut.clone()))
        .collect();
    (cuts, lockers)
}

/// The value each locker of `cluster` holds for "jobs", in their order.
async fn values_on(cluster: &TestCluster) -> Vec<String> {
    let mut values = Vec::new();
    for l in cluster.lockers() {
        let p = leader_on(&**l, "jobs")
            .await
            .expect("a value on every node");
        values.push(String::from_utf8_lossy(&p.value).into_owned());
    }
    values
}

/// What `observer` reports over the next 10 s.
async fn reports_for_10_s(observer: &mut Observer) -> Vec<Option<Leader>> {
    let mut reported = Vec::new();
    let end = tokio::time::Instant::now() + Duration::from_secs(10);
    while let Ok(Some(item)) = tokio::time::timeout_at(end, observer.recv()).await {
        reported.push(item);
    }
    reported
}

/// The values of `reported`, `None` where it said no leader.
fn shown(reported: &[Option<Leader>]) -> Vec<Option<String>> {
    reported
        .iter()
        .map(|l| {
            l.as_ref()
                .map(|l| String::from_utf8_lossy(&l.value).into_owned())
        })
        .collect()
}

/// Five lockers, the leader proclaimed "zero" on all. Its proclaim of
/// "one" reaches node 2 only and fails; its proclaim of "two" reaches
/// nodes 0 and 1 only and fails (the links drop proclamations, refreshes
/// still arrive, so the leader keeps its lease and re-sends reach the same
/// nodes). No value is on a write quorum: `Election::leader` reports a
/// value only when a write quorum holds it, so it says the leader's value
/// is unsettled (a rule that took the quorum-th newest value once
/// reported "one"). Nodes 3 and 4 answer last.
#[tokio::test(start_paused = true)]
async fn two_failed_proclaims_on_different_lockers_do_not_confirm_the_older_one() {
    let cluster = Arc::new(TestCluster::new(5, 23));
    let (cuts, lockers) = each_losing_proclamations(&cluster);
    let Scene {
        watch, mut leading, ..
    } = Scene::new(&cluster, lockers, b"zero").await;
    let cut_all_but = |reach: &[usize]| {
        for (i, cut) in cuts.iter().enumerate() {
            cut.store(!reach.contains(&i), Ordering::SeqCst);
        }
    };
    cut_all_but(&[2]);
    let one = leading.proclaim(&b"one"[..]).await;
    assert!(
        matches!(one, Err(Error::QuorumUnavailable { .. })),
        "{one:?}"
    );
    cut_all_but(&[0, 1]);
    let two = leading.proclaim(&b"two"[..]).await;
    assert!(
        matches!(two, Err(Error::QuorumUnavailable { .. })),
        "{two:?}"
    );
    assert!(!leading.is_lost());
    let values = values_on(&cluster).await;
    assert_eq!(values, ["two", "two", "one", "zero", "zero"]);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(50)), &[3, 4])
        .unwrap();

    // No value is on a write quorum now ("two" on 2 of 5, "one" on 1,
    // "zero" on 2): leader() says the leader's value is unsettled rather
    // than report a failed proclaim's value.
    match watch.leader().await {
        Err(Error::LeaderValueUnsettled { answered, .. }) => assert_eq!(answered, 5),
        other => panic!(
            "leader() must not report a value that no write quorum holds (\"one\" is on 1 of 5 \
             lockers, \"two\" on 2 of 5, \"zero\" on 2 of 5): {other:?}"
        ),
    }
}

/// Five lockers. The leader's proclaim of "second" reaches nodes 0, 1 and
/// 2 and succeeds; its links to nodes 3 and 4 drop proclamations (its
/// refreshes still arrive), so they keep "first". The watcher's nearest
/// nodes are 3 and 4, then 0. A write quorum of lockers holds "second"
/// for as long as the leader leads, and `Observer` promises "a leader is
/// reported once a write quorum of lockers holds its proclamation", with
/// `Some(leader)` "when a leader ... proclaims a new value"; `proclaim`
/// replaces the value "for `Election::leader` and the observers to
/// report".
#[tokio::test(start_paused = true)]
async fn a_value_a_write_quorum_stored_is_reported_whichever_lockers_answer_first() {
    let cluster = Arc::new(TestCluster::new(5, 24));
    let (cuts, lockers) = each_losing_proclamations(&cluster);
    let Scene {
        watch, mut leading, ..
    } = Scene::new(&cluster, lockers, b"first").await;
    let mut observer = watch.observe().unwrap();
    let seen = observer.recv().await.flatten().expect("the leader");
    assert_eq!(&seen.value[..], b"first");
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(10)), &[0])
        .unwrap();
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(50)), &[1, 2])
        .unwrap();
    cuts[3].store(true, Ordering::SeqCst);
    cuts[4].store(true, Ordering::SeqCst);
    leading
        .proclaim(&b"second"[..])
        .await
        .expect("nodes 0, 1 and 2 store it");

    let reported = reports_for_10_s(&mut observer).await;
    assert!(!leading.is_lost(), "the leader still leads");
    let values = values_on(&cluster).await;
    assert_eq!(values, ["second", "second", "second", "first", "first"]);
    let read = watch.leader().await.unwrap().expect("a leader");
    let shown = shown(&reported);
    assert!(
        shown.contains(&Some("second".to_string())) && &read.value[..] == b"second",
        "10 s after proclaim(\"second\") returned Ok, with \"second\" on 3 of 5 lockers, the \
         observer reported {shown:?} and leader() = {:?}",
        String::from_utf8_lossy(&read.value)
    );
}

/// Three lockers: "second" reaches nodes 0 and 1 (a write quorum) and
/// `proclaim` succeeds; the leader's link to node 2 drops proclamations,
/// so node 2 keeps "first", and node 2 answers the watcher first.
#[tokio::test(start_paused = true)]
async fn a_value_two_of_three_lockers_stored_is_reported_when_the_third_answers_first() {
    let cluster = Arc::new(TestCluster::new(3, 25));
    let cut = Arc::new(AtomicBool::new(false));
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| match i {
            2 => loses_proclamations(l, cut.clone()),
            _ => l,
        })
        .collect();
    let Scene {
        watch, mut leading, ..
    } = Scene::new(&cluster, lockers, b"first").await;
    let mut observer = watch.observe().unwrap();
    let seen = observer.recv().await.flatten().expect("the leader");
    assert_eq!(&seen.value[..], b"first");
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(50)), &[0, 1])
        .unwrap();
    cut.store(true, Ordering::SeqCst);
    leading
        .proclaim(&b"second"[..])
        .await
        .expect("nodes 0 and 1 store it");
    let reported = reports_for_10_s(&mut observer).await;
    assert!(!leading.is_lost(), "the leader still leads");
    let read = watch.leader().await.unwrap().expect("a leader");
    let shown = shown(&reported);
    assert!(
        shown.contains(&Some("second".to_string())) && &read.value[..] == b"second",
        "10 s after proclaim(\"second\") returned Ok, with \"second\" on 2 of 3 lockers, the \
         observer reported {shown:?} and leader() = {:?}",
        String::from_utf8_lossy(&read.value)
    );
}
