//! What `DRWMutex::waiting` says of two lockers that refused the wait's
//! round, stopped refusing, and then answered (granted) another lock of
//! the same client, while the wait has not asked them again yet.
//!
//! docs/guarantees.md ("Why a wait waits"): "for lockers whose call
//! failed, or that have not answered yet, the latest failure any call of
//! this client noted for that locker since it last answered"; and
//! another call's answer counts as the locker answering. Both lockers
//! answered after their refusal, so the refusal is not a failure "since
//! it last answered" and is not why they are out of reach now.
//!
//! Timeline (100 ms on every locker): the wait's round is refused by nodes
//! 1 and 2; at 300 ms they stop refusing, and another lock of the client is
//! granted by all three at 400 ms; the wait asks again at 459 ms.
//!
//! Reproduces a past break: the wait named the refusal that was over.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use tokio::time::{sleep, Instant};

const SEED: u64 = 6021;

#[tokio::test(start_paused = true)]
async fn a_refusal_before_the_locker_answered_again_is_not_named_as_why() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let h = common::seeded(cluster.net_lockers(), "h", SEED);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[0, 1, 2])
        .unwrap();
    cluster.set_refuse(true, &[1, 2]).unwrap();
    let mutex = h.rw_mutex(["r"]).unwrap();
    let waiter = mutex.clone();
    let start = Instant::now();
    let wait = tokio::spawn(async move {
        waiter
            .lock_timeout(Duration::from_secs(5))
            .await
            .map(|_guard| ())
    });
    sleep(Duration::from_millis(300)).await;
    let before = mutex.waiting().expect("the wait reports");
    assert!(
        before.unreachable.iter().any(|u| u.endpoint == "node-1"),
        "node-1 refuses: {before}"
    );
    cluster.set_refuse(false, &[1, 2]).unwrap();
    let other = h.rw_mutex(["other"]).unwrap();
    let guard = other.lock().await.expect("every locker answers");
    assert_eq!(start.elapsed(), Duration::from_millis(400));
    sleep(Duration::from_millis(30)).await;
    assert!(!wait.is_finished(), "the wait has not asked again yet");
    let status = mutex.waiting().expect("the wait reports");
    eprintln!("at {:?}: {status}", start.elapsed());
    for answered in ["node-1", "node-2"] {
        let stale = status
            .unreachable
            .iter()
            .find(|u| u.endpoint == answered && u.reason.contains("connection refused"));
        assert!(
            stale.is_none(),
            "{answered} granted another lock 30 ms ago, yet the wait names its earlier refusal: {status}"
        );
    }
    drop(guard);
    wait.await.unwrap().expect("granted once asked again");
}
