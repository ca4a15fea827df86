//! Leader election against in-process lockers, one test per hole that
//! users found in etcd's and Kubernetes' elections: phantom leadership
//! after a lost place in line, an observer that never hears that the
//! leader died, an observer that goes back to an older leader after a
//! partition, a failed resign that cannot be retried, and a cancelled
//! campaign that leaves something behind.
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::Duration;

use crate::common;
use crate::election_support::{campaign_won, client, leader_on, reports_within, until};
use quorum_lock::testing::{CallKind, Latency, Relay, Route, TestCluster};
use quorum_lock::{Error, LockerConfig, NetLocker, Timeouts};
use tokio::time::{sleep, timeout, Instant};

const VALIDITY: Duration = Duration::from_secs(60);

/// The nodes whose table holds `uid`.
fn holding(cluster: &TestCluster, uid: &str) -> usize {
    cluster
        .lockers()
        .iter()
        .filter(|l| l.snapshot().iter().any(|e| e.uid == uid))
        .count()
}

/// etcd's `Campaign` keeps waiting after its session's place is gone
/// (mailgun/holster#36): here a majority of lockers restarts under a
/// waiting candidate, forgetting its place. It takes the place again with
/// its re-checks and leads once the old leader is gone, with a higher term
/// and a live quorum of grants, never before the quarantine is over.
#[tokio::test(start_paused = true)]
async fn a_candidate_whose_place_was_forgotten_keeps_contending_and_never_leads_early() {
    let config = LockerConfig {
        validity: VALIDITY,
        quarantine: VALIDITY,
    };
    let cluster = Arc::new(TestCluster::with_config(3, 1, config));
    let (a, b) = (client(&cluster, "a"), client(&cluster, "b"));
    let first = campaign_won(&a, b"a").await;
    let b_election = b.election("jobs").unwrap();
    let waiting = tokio::spawn(async move { b_election.campaign(&b"b"[..]).await });
    sleep(Duration::from_millis(100)).await;
    assert!(cluster.lockers().iter().all(|l| l.waiting() == 1));

    let restarted = Instant::now();
    cluster.restart(&[0, 1]).unwrap();
    assert!(cluster.lockers()[0].waiting() == 0 && cluster.lockers()[1].waiting() == 0);
    // The old leader cannot refresh on a quorum and learns it is lost; the
    // candidate keeps asking and leads only once the quarantine ended.
    let second = timeout(VALIDITY * 4, waiting)
        .await
        .expect("the candidate leads in the end")
        .expect("campaign task")
        .expect("campaign");
    assert!(first.is_lost(), "the old leader knows it lost");
    assert!(
        restarted.elapsed() >= VALIDITY,
        "led after {:?}, inside the quarantine",
        restarted.elapsed()
    );
    assert!(second.term() > first.term());
    assert!(!second.is_lost());
    assert!(
        holding(&cluster, second.uid()) >= 2,
        "a quorum holds the new leader"
    );
}

/// etcd's `Observe` only sends new values, never that the leader went
/// away. Here the leader's process is cut off from every locker (as if it
/// died): the observer reports "no leader" once the lockers expired it,
/// within a re-check.
#[tokio::test(start_paused = true)]
async fn an_observer_hears_that_a_dead_leader_is_gone() {
    let cluster = Arc::new(TestCluster::new(3, 2));
    let (leader, watcher) = (client(&cluster, "leader"), client(&cluster, "watcher"));
    let mut observer = watcher.election("jobs").unwrap().observe().unwrap();
    assert_eq!(observer.recv().await, Some(None));
    let leading = campaign_won(&leader, b"v").await;
    let seen = until(&mut observer, Duration::from_secs(1), Option::is_some).await;
    assert_eq!(seen.map(|l| l.term), Some(leading.term()));

    let died = Instant::now();
    cluster.partition("leader", &[0, 1, 2]).unwrap();
    until(&mut observer, VALIDITY * 2, Option::is_none).await;
    let after = died.elapsed();
    let recheck = Timeouts::default().wait_recheck;
    // Entries live a validity after the last refresh, sent at most a
    // refresh interval before the death.
    assert!(after >= VALIDITY - quorum_lock::Lease::default().refresh_interval);
    assert!(
        after <= VALIDITY + recheck * 2,
        "no leader reported {after:?} after the death"
    );
    assert!(leading.is_lost());
}

/// etcd#18163: after a network gap an observer reported an older leader
/// than one it had already reported. Here an observer is cut off from
/// every locker while the lead changes twice, then from two of three
/// while one still has an old leader's entry: it reports the newest leader
/// once it can read a quorum, and never an older one.
#[tokio::test(start_paused = true)]
async fn an_observer_never_goes_back_to_an_older_leader_after_a_partition() {
    let cluster = Arc::new(TestCluster::new(3, 3));
    let (a, b, w) = (
        client(&cluster, "a"),
        client(&cluster, "b"),
        client(&cluster, "watcher"),
    );
    let mut observer = w.election("jobs").unwrap().observe().unwrap();
    assert_eq!(observer.recv().await, Some(None));
    let first = campaign_won(&a, b"a1").await;
    let seen = until(&mut observer, Duration::from_secs(1), Option::is_some).await;
    assert_eq!(seen.map(|l| l.term), Some(first.term()));

    // Cut the watcher off; node 2 is also cut off from `a`, so it keeps
    // a's entry when a resigns there... until it expires.
    cluster.partition("watcher", &[0, 1, 2]).unwrap();
    cluster.partition("a", &[2]).unwrap();
    let mut first = first;
    first.resign().await.expect("a quorum confirms");
    let second = campaign_won(&b, b"b1").await;
    assert!(second.term() > first.term());
    // Node 2 still holds a's old entry and proclamation; the watcher can
    // read nodes 1 and 2 only.
    cluster.heal_partition("watcher", &[1, 2]).unwrap();
    let mut reported = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        match timeout(Duration::from_millis(500), observer.recv()).await {
            Ok(Some(item)) => reported.push(item),
            Ok(None) => break,
            Err(_) => {}
        }
    }
    // Nodes 1 and 2 disagree (b's value on one, a's leftover on the
    // other), and either could be a copy on a minority: the watcher reports
    // neither until node 0 settles it.
    assert!(
        reported.iter().flatten().all(|l| l.term >= second.term()),
        "reported an older leader: {reported:?}"
    );
    cluster.heal_partition("watcher", &[0]).unwrap();
    let seen = until(&mut observer, Duration::from_secs(2), Option::is_some).await;
    assert_eq!(seen.map(|l| l.term), Some(second.term()), "{reported:?}");
}

/// etcd#22123: `Resign` forgot the leadership when its request failed, so
/// a retry did nothing and the key stayed. Here the first resign cannot
/// reach a quorum; the leadership stops counting at once, keeps its grants,
/// and the retry frees them at once (not at expiry).
#[tokio::test(start_paused = true)]
async fn a_failed_resign_can_be_retried() {
    let cluster = Arc::new(TestCluster::new(3, 4));
    let (a, w) = (client(&cluster, "a"), client(&cluster, "watcher"));
    let election = a.election("jobs").unwrap();
    let mut leading = election.campaign(&b"a"[..]).await.unwrap();
    let uid = leading.uid().to_owned();

    cluster.partition("a", &[0, 1]).unwrap();
    let failed = leading.resign().await;
    assert!(
        matches!(failed, Err(Error::ReleaseUnconfirmed { .. })),
        "{failed:?}"
    );
    assert!(
        leading.is_lost(),
        "a resign in progress no longer counts as leading"
    );
    assert_eq!(
        holding(&cluster, &uid),
        2,
        "the unreachable lockers keep it"
    );

    cluster.heal_partition("a", &[0, 1]).unwrap();
    leading
        .resign()
        .await
        .expect("the retry is sent and confirmed");
    assert_eq!(
        holding(&cluster, &uid),
        0,
        "freed by the retry, not by expiry"
    );
    assert_eq!(w.election("jobs").unwrap().leader().await.unwrap(), None);
    leading
        .resign()
        .await
        .expect("a confirmed resign stays done");
}

/// etcd#21128: a failed `Campaign` left its key behind. Here a campaign
/// waiting in line is cancelled, and another is cancelled at the moment
/// it was granted: neither leaves a place, grant or value behind.
#[tokio::test(start_paused = true)]
async fn a_cancelled_campaign_leaves_nothing_behind() {
    let cluster = Arc::new(TestCluster::new(3, 5));
    let (a, b) = (client(&cluster, "a"), client(&cluster, "b"));
    let mut leading = campaign_won(&a, b"a").await;
    let b_election = b.election("jobs").unwrap();
    let waited = timeout(Duration::from_secs(5), b_election.campaign(&b"b"[..])).await;
    assert!(waited.is_err(), "still waiting behind the leader");
    sleep(Duration::from_millis(100)).await;
    assert!(
        cluster.lockers().iter().all(|l| l.waiting() == 0),
        "no place left"
    );

    // Cancelled after the grant, while drawing the term or proclaiming.
    let racing = tokio::spawn({
        let b_election = b_election.clone();
        async move { b_election.campaign(&b"b"[..]).await }
    });
    sleep(Duration::from_millis(100)).await;
    leading.resign().await.unwrap();
    racing.abort();
    let _ = racing.await;
    sleep(Duration::from_millis(100)).await;
    assert_eq!(cluster.total_entries(), 0, "no grant left");
    assert!(
        cluster.lockers().iter().all(|l| l.waiting() == 0),
        "no place left"
    );
    assert_eq!(b_election.leader().await.unwrap(), None, "no value left");
}

/// A proclaim from a leader that lost its lease changes nothing.
#[tokio::test(start_paused = true)]
async fn a_lost_leader_cannot_proclaim() {
    let cluster = Arc::new(TestCluster::new(3, 6));
    let (a, w) = (client(&cluster, "a"), client(&cluster, "watcher"));
    let mut leading = campaign_won(&a, b"old").await;
    cluster.partition("a", &[0, 1, 2]).unwrap();
    leading.lost().await;
    cluster.heal_partition("a", &[0, 1, 2]).unwrap();
    let got = leading.proclaim(&b"new"[..]).await;
    assert_eq!(got, Err(Error::LockLost));
    let now = w.election("jobs").unwrap().leader().await.unwrap();
    assert!(
        now.as_ref().is_none_or(|l| &l.value[..] == b"old"),
        "{now:?}"
    );
}

/// Values over the limit are refused before anything is taken.
#[tokio::test]
async fn a_value_over_the_limit_is_refused_up_front() {
    let cluster = Arc::new(TestCluster::new(3, 7));
    let a = client(&cluster, "a");
    let too_long = vec![b'x'; quorum_lock::MAX_VALUE_LEN + 1];
    let got = a.election("jobs").unwrap().campaign(too_long).await;
    assert!(matches!(got, Err(Error::InvalidArgument(_))), "{got:?}");
    assert_eq!(cluster.total_entries(), 0);
}

/// A resign confirmed by nodes 0 and 1 while the leader's link to node 2
/// was cut leaves the leader's value on node 2 until it expires. That copy
/// is not a leader: `leader()` right after the resign says nobody leads,
/// and an observer that said so never goes back to the resigned leader,
/// even when node 2 answers first and nodes 0 and 1 are slow.
#[tokio::test(start_paused = true)]
async fn a_resigned_leaders_leftover_value_is_never_reported_again() {
    let cluster = Arc::new(TestCluster::new(3, 11));
    let (a, w) = (client(&cluster, "a"), client(&cluster, "watcher"));
    let watch = w.election("jobs").unwrap();
    let mut observer = watch.observe().unwrap();
    let mut leading = campaign_won(&a, b"a").await;
    let seen = until(&mut observer, Duration::from_secs(2), Option::is_some).await;
    assert_eq!(seen.map(|l| l.term), Some(leading.term()));

    cluster.partition("a", &[2]).unwrap();
    leading.resign().await.expect("nodes 0 and 1 confirm");
    assert!(
        leader_on(&*cluster.lockers()[2], "jobs").await.is_some(),
        "node 2 keeps the resigned leader's value"
    );
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(50)), &[0, 1])
        .unwrap();
    assert_eq!(watch.leader().await.unwrap(), None);
    // Within the entry's life on node 2 (it expires a validity after the
    // grant, 60 s): "no leader" once, and nothing after it.
    let reported = reports_within(&mut observer, Duration::from_secs(50)).await;
    assert_eq!(reported, vec![None]);
    assert!(leader_on(&*cluster.lockers()[2], "jobs").await.is_some());
}

/// `inner` through a link that loses every proclamation: a candidate
/// whose proclamation cannot reach this locker.
fn no_proclaim(inner: Arc<dyn NetLocker>) -> Arc<dyn NetLocker> {
    Arc::new(Relay::new(inner, |kind, _| match kind {
        CallKind::Proclaim => Route::Lost("the proclamation was lost".into()),
        _ => Route::Forward,
    }))
}

/// A campaign whose value reached node 2 but not nodes 0 and 1 is
/// cancelled, and its undo cannot reach node 2 (cut off at the moment of
/// the cancel), so its value stays there. Its candidate never led: neither
/// `leader()` nor an observer reports it, even when node 2 answers first.
#[tokio::test(start_paused = true)]
async fn a_cancelled_campaigns_value_left_on_one_node_is_never_reported() {
    let cluster = Arc::new(TestCluster::new(3, 12));
    let (a, w) = (client(&cluster, "a"), client(&cluster, "watcher"));
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| match i {
            2 => l,
            _ => no_proclaim(l),
        })
        .collect();
    let b = common::seeded(lockers, "b", 7);
    let watch = w.election("jobs").unwrap();
    let mut observer = watch.observe().unwrap();
    let mut leading = campaign_won(&a, b"a").await;
    let a_term = leading.term();
    until(&mut observer, Duration::from_secs(2), Option::is_some).await;

    let campaign = tokio::spawn({
        let election = b.election("jobs").unwrap();
        async move { election.campaign(&b"b"[..]).await }
    });
    sleep(Duration::from_secs(1)).await;
    leading.resign().await.expect("a quorum confirms");
    let node2 = cluster.lockers()[2].clone();
    let deadline = Instant::now() + Duration::from_secs(20);
    while leader_on(&*node2, "jobs")
        .await
        .is_none_or(|p| p.term <= a_term)
    {
        assert!(Instant::now() < deadline, "b's value never reached node 2");
        sleep(Duration::from_millis(1)).await;
    }
    cluster.partition("b", &[2]).unwrap();
    campaign.abort();
    assert!(campaign.await.is_err(), "cancelled before it returned");
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(50)), &[0, 1])
        .unwrap();
    sleep(Duration::from_secs(1)).await;
    let left = leader_on(&*node2, "jobs").await;
    assert!(
        left.as_ref().is_some_and(|p| &p.value[..] == b"b"),
        "node 2 keeps the cancelled campaign's value: {left:?}"
    );
    assert_eq!(cluster.total_entries(), 1, "undone on nodes 0 and 1");

    assert_eq!(watch.leader().await.unwrap(), None);
    let reported = reports_within(&mut observer, Duration::from_secs(40)).await;
    assert_eq!(reported, vec![None], "only the resign is reported");
}
