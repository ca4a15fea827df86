//! Why a wait waits, and what `lock_timeout` gives up with, when two
//! lockers refused the wait's round, then answered (granted) another lock
//! of the same client, and the wait has not asked them again yet.
//!
//! docs/guarantees.md ("Why a wait waits"): a refusal of this wait's round
//! "is over once the locker answered another call", and a locker that has
//! not answered counts as still answering for twice as long as its latest
//! answer took, "counted from the earliest call it has left unanswered
//! [...], and as unreachable after that ("no answer yet after 300ms"), or
//! at once when it never answered this client or a call to it failed since
//! it last did". Lockers 1 and 2 have no call left unanswered: they
//! answered every call since their refusal, 100 ms ago. They are not out of
//! reach, and nothing was asked that they did not answer; the wait must
//! not name them "no answer yet" and give up with `QuorumUnavailable`.
//!
//! Timeline (100 ms on every locker): the wait's round is refused by nodes
//! 1 and 2 and granted by node 0, and its retries to them are refused too
//! until 3 s, when they stop refusing; another lock of the client is
//! granted by all three at 3.1 s; the wait asks them again only at 3.41 s
//! (this seed's backoff). At 3.2 s `waiting()` names them "no answer yet
//! after 3.2s", and the deadline at 3.3 s gives up with `QuorumUnavailable`.
//!
//! Reproduces a past break: they were named "no answer yet" and the wait gave up with QuorumUnavailable.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Error, WaitReason};
use tokio::time::{sleep, Instant};

const SEED: u64 = 6021;
/// How long nodes 1 and 2 refuse: the wait's retries to them are spaced
/// by then, so it asks them again only at 3.41 s with this seed.
const REFUSE_MS: u64 = 3000;

#[tokio::test(start_paused = true)]
async fn lockers_that_answered_since_their_refusal_are_not_named_unreachable() {
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
            .lock_timeout(Duration::from_millis(3300))
            .await
            .map(|_guard| ())
    });
    sleep(Duration::from_millis(REFUSE_MS)).await;
    cluster.set_refuse(false, &[1, 2]).unwrap();
    let other = h.rw_mutex(["other"]).unwrap();
    let guard = other.lock().await.expect("every locker answers");
    assert_eq!(start.elapsed(), Duration::from_millis(3100));
    sleep(Duration::from_millis(100)).await;
    assert!(!wait.is_finished(), "the wait has not asked them again yet");
    let status = mutex.waiting().expect("the wait reports");
    eprintln!("at {:?}: {status} ({status:?})", start.elapsed());
    let result = wait.await.unwrap();
    eprintln!("at {:?}: {result:?}", start.elapsed());
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
