//! An observer after a leader's `proclaim` was cancelled while its calls
//! were on their way (they reach the lockers 10 s later, after the
//! leader's re-send of its current value, which stays above them). docs/election.md: an `Observer` is "a `Stream` of
//! `Option<Leader>`, one item per change"; `Some(leader)` comes "when a
//! leader is elected or proclaims a new value". Nothing changed here: no
//! read ever found the cancelled value, and the leader's value is the one
//! the observer already reported (the `proclaim` docs: the re-send "puts
//! its previous value back on every locker, above the abandoned one").
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use crate::election_support::campaign_won;
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::NetLocker;
use tokio::time::sleep;

/// Delivers proclamations sent while `slow` is set 10 s late.
fn stalls_values(inner: Arc<dyn NetLocker>, slow: Arc<AtomicBool>) -> Arc<dyn NetLocker> {
    Arc::new(Relay::new(inner, move |kind, _| match kind {
        CallKind::Proclaim if slow.load(Ordering::SeqCst) => Route::Late(Duration::from_secs(10)),
        _ => Route::Forward,
    }))
}

#[tokio::test(start_paused = true)]
async fn a_proclaim_cancelled_before_any_locker_stored_it_reports_nothing_new() {
    let cluster = Arc::new(TestCluster::new(3, 12));
    let slow = Arc::new(AtomicBool::new(false));
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .map(|l| stalls_values(l, slow.clone()))
        .collect();
    let leader = common::seeded(lockers, "leader", 1);
    let watcher = common::seeded(cluster.net_lockers(), "watcher", 2);
    let mut observer = watcher.election("jobs").unwrap().observe().unwrap();
    assert_eq!(observer.recv().await, Some(None));
    let mut leading = campaign_won(&leader, b"v0").await;
    let first = observer.recv().await.flatten().expect("the leader");
    assert_eq!(&first.value[..], b"v0");

    slow.store(true, Ordering::SeqCst);
    let cancelled =
        tokio::time::timeout(Duration::from_millis(50), leading.proclaim(&b"v1"[..])).await;
    assert!(cancelled.is_err() || cancelled.is_ok_and(|r| r.is_err()));
    sleep(Duration::from_millis(100)).await;
    slow.store(false, Ordering::SeqCst);
    // The leader's value is still v0 everywhere; wait out a few re-sends.
    sleep(Duration::from_secs(35)).await;
    let mut items = Vec::new();
    while let Ok(Some(item)) = tokio::time::timeout(Duration::ZERO, observer.recv()).await {
        items.push(item.map(|l| {
            (
                l.term,
                l.seq,
                String::from_utf8_lossy(&l.value).into_owned(),
            )
        }));
    }
    assert!(
        items.is_empty(),
        "the leader (term {}, seq {}, value v0) changed nothing after its cancelled proclaim; \
         the observer reported {items:?}",
        first.term,
        first.seq
    );
    drop(leading);
}
