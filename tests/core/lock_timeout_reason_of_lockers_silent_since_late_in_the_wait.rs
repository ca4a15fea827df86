//! Reproduces a past break: a polling wait of 2 s gave up naming two lockers that had answered every round until they died at 1.5 s as "no answer yet after 2.0s" (the whole wait), not the time they have been silent.
//!
//! docs/guarantees.md ("Why a wait waits"): "A locker that has not
//! answered counts as still answering for twice as long as its latest
//! answer took, counted from the earliest call it has left unanswered
//! [...], and as unreachable after that ("no answer yet after 300ms")";
//! `Error::QuorumUnavailable` names "each locker that did not answer and
//! why". Nodes 1 and 2 answered each round (every ~210 ms, in 10 ms) up to
//! 1.5 s, so the call they left unanswered was asked after 1.5 s: at the
//! 2 s deadline they have been silent for less than 500 ms. Saying no
//! answer came for 2 s tells an operator they were gone from the start.
//!
//! Three lockers, 10 ms each (quorum 2); another client holds the lock;
//! the wait polls (`Waiting::Poll`, retries every 200 ms) with a 2 s
//! deadline; nodes 1 and 2 die at 1.5 s.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_wait_for_a_held_lock::{gave_up, status_at};
use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error, RetryPolicy, Waiting};
use tokio::time::Instant;

const SEED: u64 = 36;

/// The silence a reason "no answer yet after <d>" gives.
fn silence(reason: &str) -> Option<Duration> {
    let d = reason.strip_prefix("no answer yet after ")?;
    if let Some(ms) = d.strip_suffix("ms") {
        return ms
            .parse::<f64>()
            .ok()
            .map(|ms| Duration::from_secs_f64(ms / 1e3));
    }
    d.strip_suffix('s')?
        .parse::<f64>()
        .ok()
        .map(Duration::from_secs_f64)
}

#[tokio::test(start_paused = true)]
async fn lock_timeout_names_how_long_lockers_have_been_silent() {
    let seed = SEED;
    eprintln!("seed {seed}");
    let cluster = TestCluster::new(3, seed);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(10)), &[0, 1, 2])
        .unwrap();
    let endpoints: Vec<String> = cluster.net_lockers().iter().map(|l| l.endpoint()).collect();
    let holder = Dsync::builder(cluster.net_lockers())
        .owner("holder")
        .rng_seed(seed)
        .build()
        .unwrap();
    let h = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(seed + 1)
        .waiting(Waiting::Poll)
        .retry(RetryPolicy {
            initial: Duration::from_millis(200),
            max: Duration::from_millis(200),
        })
        .build()
        .unwrap();
    let start = Instant::now();
    let _held = holder.rw_mutex(["res"]).unwrap().lock().await.unwrap();
    let mutex = h.rw_mutex(["res"]).unwrap();
    let wait = common::spawn_lock_timeout(&mutex, Duration::from_millis(2_000));
    let before = status_at(&mutex, start, 1_500).await;
    assert_eq!(
        before.map(|s| s.held_elsewhere),
        Some(3),
        "all three answered"
    );
    let died = start.elapsed();
    cluster.crash(&[1, 2]).unwrap();
    let result = gave_up(wait, start).await;
    let gave_up = start.elapsed();
    let Err(Error::QuorumUnavailable { unreachable, .. }) = &result else {
        panic!("one locker of three answers: expected QuorumUnavailable, got {result:?}");
    };
    let named: Vec<&str> = unreachable.iter().map(|u| u.endpoint.as_str()).collect();
    assert_eq!(named, [endpoints[1].as_str(), endpoints[2].as_str()]);
    for locker in unreachable {
        let silent = silence(&locker.reason);
        assert!(
            silent.is_some_and(|s| s <= gave_up - died),
            "{} answered every round until it died {:?} before the deadline; its reason \
             says {:?}",
            locker.endpoint,
            gave_up - died,
            locker.reason
        );
    }
}
