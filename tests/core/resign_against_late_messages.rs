//! A confirmed resign against messages the network delivers late: a
//! refresh and a re-sent proclamation that the leader sent before it
//! resigned, and that reach a restarted locker (in quarantine) after the
//! resign's unlock did.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use crate::election_support::campaign_won;
use quorum_lock::testing::TestCluster;
use quorum_lock::{Error, NetLocker};
use tokio::time::sleep;

/// Three lockers. Node 2 restarted (60 s of quarantine) and the leader's
/// refresh re-created its entry there. The leader's link to node 1 is then
/// cut, and its refresh and re-sent value to node 2 are slow; it resigns,
/// confirmed by nodes 0 and 2, while that refresh and value are still on
/// their way. They reach node 2 after the unlock. docs/election.md: "After
/// a `resign()` that returned `Ok`, `leader()` returns `None` or a newer
/// leader: the resigned term is on fewer lockers than a write quorum from
/// then on." Node 1 still has the leader's copy (its unlock was lost); if
/// the late messages re-created the entry and value on node 2, the two make
/// a write quorum once node 2's quarantine is over.
#[tokio::test(start_paused = true)]
async fn a_confirmed_resign_is_not_undone_by_a_refresh_that_arrives_after_it() {
    let cluster = Arc::new(TestCluster::new(3, 36));
    let late = Arc::new(AtomicBool::new(false));
    let delayed = Arc::new(AtomicUsize::new(0));
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| match i {
            2 => common::late_refreshes(l, late.clone(), delayed.clone()),
            _ => l,
        })
        .collect();
    let a = common::seeded(lockers, "a", 7);
    let w = common::seeded(cluster.net_lockers(), "watcher", 8);
    let watch = w.election("jobs").unwrap();
    let mut leading = campaign_won(&a, b"a").await;
    let term = leading.term();

    cluster.restart(&[2]).unwrap();
    let restarted = tokio::time::Instant::now();
    // A refresh and a re-send re-create the entry and value on node 2.
    sleep(Duration::from_secs(12)).await;
    cluster.partition("a", &[1]).unwrap();
    late.store(true, Ordering::SeqCst);
    // Wait until a refresh and a re-sent value to node 2 are on their way.
    let mut waited = 0;
    while delayed.load(Ordering::SeqCst) < 2 && waited < 400 {
        sleep(Duration::from_millis(50)).await;
        waited += 1;
    }
    assert!(delayed.load(Ordering::SeqCst) >= 2, "no refresh was sent");
    leading
        .resign()
        .await
        .expect("nodes 0 and 2 confirm the resign");
    late.store(false, Ordering::SeqCst);
    // An observer that starts now must never report the resigned term.
    let mut observer = watch.observe().unwrap();
    let uid = leading.uid().to_owned();
    let holds = |i: usize| {
        let locker = cluster.lockers()[i].clone();
        let uid = uid.clone();
        async move {
            NetLocker::locks(&*locker)
                .await
                .expect("a local listing")
                .iter()
                .any(|l| l.uid == uid)
        }
    };
    assert!(
        !holds(0).await && !holds(2).await,
        "the resign freed nodes 0 and 2"
    );
    assert!(holds(1).await, "node 1 missed the unlock");
    sleep(Duration::from_secs(5)).await;
    // By now (3.5 s after they were sent) the late refresh and value have
    // reached node 2: a `Route::Late` call is delivered whoever waits.
    assert!(
        !holds(2).await,
        "the late refresh re-created the entry on node 2 after its unlock"
    );

    // Node 2's quarantine ends 60 s after its restart; node 1's copy lives
    // until a validity after its last refresh.
    let after_quarantine = restarted + Duration::from_secs(61);
    tokio::time::sleep_until(after_quarantine).await;
    let mut reported = Vec::new();
    for _ in 0..4 {
        match watch.leader().await {
            Ok(Some(l)) => reported.push((l.term, l.seq)),
            Ok(None) | Err(Error::LeaderUnsettled { .. }) => {}
            Err(err) => panic!("unexpected error {err}"),
        }
        sleep(Duration::from_secs(1)).await;
    }
    let mut observed = Vec::new();
    while let Ok(Some(item)) = tokio::time::timeout(Duration::ZERO, observer.recv()).await {
        observed.extend(item.map(|l| (l.term, l.seq)));
    }
    assert!(
        reported.is_empty() && observed.is_empty(),
        "after the resign of term {term} was confirmed, leader() reported {reported:?} and an \
         observer started after it reported {observed:?}"
    );
}
