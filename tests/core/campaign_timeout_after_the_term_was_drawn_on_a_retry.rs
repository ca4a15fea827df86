//! Reproduces a past break: a campaign whose first term draw failed (two lockers refused connections for a moment) and whose retried draw those lockers then answered gave up, with its proclamation on its way, with the first draw's `QuorumUnavailable`: "answered 0", both lockers "connection refused".
//!
//! docs/guarantees.md ("Why a wait waits"): a semaphore's or campaign's
//! error "is the latest step's"; "After a grant, a locker is out of reach
//! when a call to it failed since, with no answer after (...), or when it
//! has left a call unanswered for twice as long as its latest answer took;
//! with too few of the others, the operation gives up with
//! `QuorumUnavailable` naming those out of reach and why, and otherwise
//! with `Timeout` (its calls were answered, or are still coming)". The
//! operation's watch notes a failed step as why "if the operation gives up
//! before anything else happens" (`WaitWatch::note`); here the step was
//! retried and succeeded, and the next one is on its way.
//!
//! Three lockers, 100 ms each (quorum 2); retries after 200 ms. The
//! campaign's lock is granted at 100 ms; nodes 1 and 2 refuse connections
//! from 50 ms to 150 ms, so the term draw sent at 100 ms fails at once on
//! them. The retried draw (about 300 ms) is answered by all three at about
//! 400 ms and the proclamation is sent then. At the 450 ms deadline every
//! locker has answered its latest call but the proclamation, on its way
//! for 50 ms: `Timeout`. The campaign names nodes 1 and 2, refused.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_campaign_with_a_deadline::{campaign_ended, spawn_campaign};
use quorum_lock::testing::{CallKind, Latency, TestCluster};
use quorum_lock::{Dsync, Error, RetryPolicy};
use tokio::time::{sleep, Instant};

const SEED: u64 = 36;

#[tokio::test(start_paused = true)]
async fn campaign_timeout_after_the_term_was_drawn_on_a_retry_is_a_timeout() {
    let seed = SEED;
    eprintln!("seed {seed}");
    let cluster = TestCluster::new(3, seed);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[0, 1, 2])
        .unwrap();
    let h = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(seed)
        .retry(RetryPolicy {
            initial: Duration::from_millis(200),
            max: Duration::from_millis(200),
        })
        .build()
        .unwrap();
    let start = Instant::now();
    let campaign = spawn_campaign(&h, Duration::from_millis(450));
    sleep(Duration::from_millis(50)).await;
    cluster.set_refuse(true, &[1, 2]).unwrap();
    sleep(Duration::from_millis(100)).await;
    cluster.set_refuse(false, &[1, 2]).unwrap();
    sleep(Duration::from_millis(440).saturating_sub(start.elapsed())).await;
    let node = &cluster.nodes()[1];
    let (draws, proclaims) = (
        node.stats(CallKind::Fence).seen,
        node.stats(CallKind::Proclaim).seen,
    );
    eprintln!(
        "at {:?}: node-1 asked {draws} term draws, {proclaims} proclamations",
        start.elapsed()
    );
    assert_eq!((draws, proclaims), (2, 1), "the retried draw was answered");
    let result = campaign_ended(campaign, Duration::from_secs(5)).await;
    eprintln!("gave up at {:?} with: {result:?}", start.elapsed());
    assert!(
        matches!(result, Err(Error::Timeout)),
        "every locker answered its latest call and the proclamation is on its way for \
         50 ms (answers take 100 ms): expected Timeout, got {result:?}"
    );
}
