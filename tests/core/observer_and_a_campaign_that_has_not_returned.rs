//! An observer reports the value on a write quorum of lockers held under
//! the lock, whether or not the candidate's `campaign` has returned
//! (docs/election.md, "What is not guaranteed": "A candidate whose
//! campaign has not returned"). What these tests hold it to: once the
//! campaign is dropped, its undo frees the entries at once, and the
//! observer and `leader()` say "no leader" within a read.
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::Duration;

use crate::common;
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, NetLocker, Observer};
use tokio::time::Instant;

const SEED: u64 = 3;

/// How long after a campaign is dropped its value may still be reported:
/// its undo goes out at once; the observer's next read follows the push.
const GONE_WITHIN: Duration = Duration::from_secs(1);

/// A watcher's observer (which has said "no leader" once) and a candidate
/// whose lockers store its proclamation at once but answer it `late`.
async fn scene(late: Duration) -> (Observer, Dsync, Dsync) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let watcher = common::seeded(cluster.net_lockers(), "watcher", SEED);
    let mut observer = watcher.election("jobs").unwrap().observe().unwrap();
    assert_eq!(observer.recv().await, Some(None), "nobody leads at first");
    let view: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .map(|l| {
            Arc::new(Relay::new(l, move |kind, _| match kind {
                CallKind::Proclaim => Route::SlowReply(late),
                _ => Route::Forward,
            })) as Arc<dyn NetLocker>
        })
        .collect();
    let candidate = common::seeded(view, "candidate", SEED + 1);
    (observer, watcher, candidate)
}

/// Campaigns for `for_how_long`, then drops the campaign; what the
/// observer reported meanwhile and up to `GONE_WITHIN` after, with when.
async fn campaign_then_drop(
    mut observer: Observer,
    watcher: &Dsync,
    candidate: &Dsync,
    for_how_long: Duration,
) -> Vec<(Duration, Option<String>)> {
    let began = Instant::now();
    let watching = tokio::spawn(async move {
        let mut items = Vec::new();
        let end = began + for_how_long + GONE_WITHIN;
        while let Ok(Some(item)) = tokio::time::timeout_at(end, observer.recv()).await {
            items.push((
                began.elapsed(),
                item.map(|l| String::from_utf8_lossy(&l.value).into_owned()),
            ));
        }
        items
    });
    let election = candidate.election("jobs").unwrap();
    let campaigned = tokio::time::timeout(for_how_long, election.campaign(&b"pending"[..])).await;
    assert!(campaigned.is_err(), "the campaign returned: {campaigned:?}");
    let items = watching.await.unwrap();
    let leader = watcher.election("jobs").unwrap().leader().await;
    assert!(
        matches!(leader, Ok(None)),
        "{GONE_WITHIN:?} after the campaign was dropped, leader() says {leader:?}"
    );
    items
}

fn ends_with_no_leader(items: &[(Duration, Option<String>)], dropped: Duration) {
    let last = items.last().expect("the observer reported something");
    assert_eq!(
        last.1, None,
        "{GONE_WITHIN:?} after the campaign was dropped at {dropped:?}, the observer still \
         reports it: {items:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_campaign_dropped_after_its_value_reached_every_locker_is_reported_no_longer_than_its_undo_takes(
) {
    let (observer, watcher, candidate) = scene(Duration::from_secs(2)).await;
    let dropped = Duration::from_millis(500);
    let items = campaign_then_drop(observer, &watcher, &candidate, dropped).await;
    ends_with_no_leader(&items, dropped);
}

#[tokio::test(start_paused = true)]
async fn a_candidate_whose_proclamations_are_answered_late_is_reported_until_it_gives_up() {
    // Later than the round's deadline (`Timeouts::refresh`, 5 s): the
    // campaign retries while it holds the lock and does not return.
    let (observer, watcher, candidate) = scene(Duration::from_secs(6)).await;
    let dropped = Duration::from_secs(30);
    let items = campaign_then_drop(observer, &watcher, &candidate, dropped).await;
    assert!(
        items
            .iter()
            .any(|(_, item)| item.as_deref() == Some("pending")),
        "the candidate, holding the lock with its value on every locker, was never reported: \
         {items:?}"
    );
    ends_with_no_leader(&items, dropped);
}
