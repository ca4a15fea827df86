//! Reproduces a past break: a lock whose calls to one locker all failed before they were sent (connection refused) queued an unlock for that locker at each release, probed it while it was down and sent it every uid once it came back, none of which it ever saw.
//!
//! docs/guarantees.md, "No leaks": "A lock call that failed may have been
//! applied (its reply was lost), so it is unlocked like a grant"; a call
//! that "failed before it was sent (no connection could be had)" was not
//! applied (`Error::never_sent`). Three lockers reached over a link;
//! locker 2 refuses every connection for a while (a restart, a deploy).
//! Ten lock/unlock cycles each get their grant from lockers 0 and 1. Each
//! release still targets locker 2 (its answer reads `Failed`), its unlock
//! fails, goes to the retry queue, is probed while locker 2 is down, and
//! lands once it is back: unlock calls for uids the locker never saw.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::NetLocker;

const SEED: u64 = 36_343;

#[tokio::test(start_paused = true)]
async fn an_unlock_sends_nothing_to_a_locker_that_refused_every_connection_of_its_lock() {
    let cluster = TestCluster::new(3, SEED);
    let down = Arc::new(AtomicBool::new(true));
    let tried = Arc::new(AtomicU64::new(0));
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let (down, tried) = (down.clone(), tried.clone());
            Arc::new(Relay::new(l, move |kind, _| {
                if i == 2 && kind == CallKind::Unlock {
                    tried.fetch_add(1, Ordering::SeqCst);
                }
                if i == 2 && down.load(Ordering::SeqCst) {
                    Route::Lost("connection refused (injected fault)".into())
                } else {
                    Route::Forward
                }
            })) as Arc<dyn NetLocker>
        })
        .collect();
    let w = common::seeded(lockers, "w", SEED);
    let mutex = w.rw_mutex(["res"]).unwrap();
    for round in 0..10 {
        let guard = tokio::time::timeout(Duration::from_secs(5), mutex.lock())
            .await
            .expect("in time")
            .expect("lockers 0 and 1 grant");
        let released = tokio::time::timeout(Duration::from_secs(5), guard.unlock())
            .await
            .expect("in time");
        assert!(released.is_ok(), "round {round}: {released:?}");
    }
    assert_eq!(cluster.total_entries(), 0, "nothing is held");
    // A few seconds down, then back.
    tokio::time::sleep(Duration::from_secs(5)).await;
    down.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(120)).await;
    let _ = tokio::time::timeout(
        Duration::from_secs(5),
        w.finish_releases(Duration::from_secs(5)),
    )
    .await;
    let reached = cluster.nodes()[2].stats(CallKind::Unlock).seen;
    let attempted = tried.load(Ordering::SeqCst);
    eprintln!("unlocks to locker 2: {attempted} attempted, {reached} delivered");
    assert_eq!(
        (attempted, reached),
        (0, 0),
        "locker 2 never received a lock call of any of the ten uids (each was refused before \
         it was sent), yet {attempted} unlocks were sent its way and {reached} reached it"
    );
}
