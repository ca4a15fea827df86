//! Why a wait waits, and what `lock_timeout` gives up with, when two
//! lockers refused the wait's round, then answered (granted) another lock
//! of the same client, and the wait has not asked them again yet.
//!
//! docs/guarantees.md ("Why a wait waits"): "for lockers whose call
//! failed, or that have not answered yet, the latest failure any call of
//! this client noted for that locker since it last answered"; a refusal
//! of this wait's round "is over once the locker answered another call";
//! and a locker that has not answered counts as still answering for twice
//! as long as its latest answer took, "counted from the earliest call it
//! has left unanswered [...], and as unreachable after that".
//!
//! The scene (100 ms on every locker, seed 6021): the wait's round is
//! refused by nodes 1 and 2 and granted by node 0; the two stop refusing
//! after a while, and another lock of the client is granted by all three.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{DRWMutex, Dsync, Error, WaitReason, WaitStatus, WriteGuard};
use tokio::task::JoinHandle;
use tokio::time::{sleep, Instant};

const SEED: u64 = 6021;

/// The wait on "r" of client "h", whose nodes 1 and 2 refuse.
struct Scene {
    cluster: TestCluster,
    h: Dsync,
    mutex: DRWMutex,
    wait: JoinHandle<Result<(), Error>>,
    start: Instant,
}

impl Scene {
    fn start(timeout: Duration) -> Self {
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
        let wait = tokio::spawn(async move { waiter.lock_timeout(timeout).await.map(|_guard| ()) });
        Scene {
            cluster,
            h,
            mutex,
            wait,
            start,
        }
    }

    /// Nodes 1 and 2 stop refusing at `at`, and another lock of "h" is
    /// granted by all three a round trip later; its guard.
    async fn answered_another_call(&self, at: Duration) -> WriteGuard {
        sleep(at.saturating_sub(self.start.elapsed())).await;
        self.cluster.set_refuse(false, &[1, 2]).unwrap();
        let other = self.h.rw_mutex(["other"]).unwrap();
        let guard = other.lock().await.expect("every locker answers");
        assert_eq!(self.start.elapsed(), at + Duration::from_millis(100));
        guard
    }

    /// `waiting()` `after` a wait, while the wait has not asked nodes 1
    /// and 2 again.
    async fn status_after(&self, after: Duration) -> WaitStatus {
        sleep(after).await;
        assert!(
            !self.wait.is_finished(),
            "the wait has not asked them again yet"
        );
        let status = self.mutex.waiting().expect("the wait reports");
        eprintln!("at {:?}: {status} ({status:?})", self.start.elapsed());
        status
    }
}

/// Reproduces a past break: the wait named the refusal that was over.
///
/// The two stop refusing at 300 ms, the other lock is granted at 400 ms,
/// and the wait asks again only at 459 ms.
#[tokio::test(start_paused = true)]
async fn a_refusal_before_the_locker_answered_again_is_not_named_as_why() {
    let scene = Scene::start(Duration::from_secs(5));
    sleep(Duration::from_millis(300)).await;
    let before = scene.mutex.waiting().expect("the wait reports");
    assert!(
        before.unreachable.iter().any(|u| u.endpoint == "node-1"),
        "node-1 refuses: {before}"
    );
    let guard = scene
        .answered_another_call(Duration::from_millis(300))
        .await;
    let status = scene.status_after(Duration::from_millis(30)).await;
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
    scene.wait.await.unwrap().expect("granted once asked again");
}

/// Reproduces a past break: they were named "no answer yet" and the wait
/// gave up with `QuorumUnavailable`.
///
/// The wait's retries to them are refused until 3 s, so this seed's
/// backoff asks them again only at 3.41 s; the other lock is granted at
/// 3.1 s, and the wait's deadline is 3.3 s. They have no call left
/// unanswered: they are not out of reach, and the wait must not give up
/// with `QuorumUnavailable`.
#[tokio::test(start_paused = true)]
async fn lockers_that_answered_since_their_refusal_are_not_named_unreachable() {
    let scene = Scene::start(Duration::from_millis(3300));
    let guard = scene
        .answered_another_call(Duration::from_millis(3000))
        .await;
    let status = scene.status_after(Duration::from_millis(100)).await;
    let result = scene.wait.await.unwrap();
    eprintln!("at {:?}: {result:?}", scene.start.elapsed());
    for answered in ["node-1", "node-2"] {
        assert!(
            !status.unreachable.iter().any(|u| u.endpoint == answered),
            "{answered} answered every call since its refusal (the latest 100 ms ago) \
             and has none left unanswered, yet the wait names it unreachable: {status}"
        );
    }
    assert_ne!(status.reason(), WaitReason::NoQuorum, "{status}");
    assert!(
        !matches!(result, Err(Error::QuorumUnavailable { .. })),
        "every locker answers, yet the wait gives up with {result:?}"
    );
    drop(guard);
}
