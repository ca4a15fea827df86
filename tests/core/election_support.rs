//! What the election tests share: a client of a test cluster, what one
//! locker alone says of an election, what an observer reports, and a link
//! that loses proclamations.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, Leader, Leadership, LockArgs, NetLocker, Observer, Proclamation};
use tokio::time::{timeout, Instant};

/// A client of `cluster` whose calls carry `owner`, which partitions cut off.
pub(crate) fn client(cluster: &TestCluster, owner: &str) -> Dsync {
    common::seeded(cluster.net_lockers(), owner, 7)
}

/// The leadership `ds` won by campaigning in "jobs" with `value`.
pub(crate) async fn campaign_won(ds: &Dsync, value: &[u8]) -> Leadership {
    ds.election("jobs").unwrap().campaign(value).await.unwrap()
}

/// What one locker alone says of the election `name`.
pub(crate) async fn leader_on(locker: &dyn NetLocker, name: &str) -> Option<Proclamation> {
    let args = LockArgs {
        uid: "probe".into(),
        resources: vec![format!("election/{name}")].into(),
        owner: "probe".into(),
        source: "probe".into(),
        quorum: 1,
    };
    locker
        .leader(&args, None)
        .await
        .expect("the locker answers")
}

/// Everything `observer` reports within `window`.
pub(crate) async fn reports_within(
    observer: &mut Observer,
    window: Duration,
) -> Vec<Option<Leader>> {
    let end = Instant::now() + window;
    let mut reported = Vec::new();
    while let Ok(Some(item)) = timeout(end - Instant::now(), observer.recv()).await {
        reported.push(item);
    }
    reported
}

/// Reads from `observer` until `want` holds for an item, within `within`.
pub(crate) async fn until(
    observer: &mut Observer,
    within: Duration,
    want: impl Fn(&Option<Leader>) -> bool,
) -> Option<Leader> {
    timeout(within, async {
        loop {
            let item = observer.recv().await.expect("the observer runs");
            if want(&item) {
                return item;
            }
        }
    })
    .await
    .expect("the observer reported the expected state in time")
}

/// `inner` through a link that loses proclamations while `cut` is set;
/// everything else still arrives.
pub(crate) fn loses_proclamations(
    inner: Arc<dyn NetLocker>,
    cut: Arc<AtomicBool>,
) -> Arc<dyn NetLocker> {
    Arc::new(Relay::new(inner, move |kind, _| {
        if kind == CallKind::Proclaim && cut.load(Ordering::SeqCst) {
            Route::Lost("the proclamation was lost".into())
        } else {
            Route::Forward
        }
    }))
}
