//! What `Semaphore::waiting()` says, and what `acquire_timeout` gives up
//! with, when the permit is granted and the lockers stop answering while
//! the acquire releases its place in line (nothing held elsewhere). The
//! rustdoc of `Semaphore::waiting`: `None` once the acquire "holds every
//! lock it needs and only confirms that its place in line was released
//! (where `acquire_timeout` can still give up, with
//! `Error::QuorumUnavailable`, when the lockers do not answer)". A review
//! found the rustdoc promising more: a reason that agrees with the error.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::Error;
use tokio::time::{sleep, Instant};

use super::lost_locks_and_wait_outcomes::entries_on;
use crate::common;

const SEED: u64 = 4243;

#[tokio::test(start_paused = true)]
async fn waiting_is_none_while_the_line_release_goes_unanswered_and_the_timeout_names_the_lockers()
{
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[0, 1, 2])
        .unwrap();
    let h = common::seeded(cluster.net_lockers(), "h", SEED);
    let sem = h.semaphore("rel", 2).unwrap();
    let waiter = sem.clone();
    let acquire = tokio::spawn(async move { waiter.acquire_timeout(Duration::from_secs(2)).await });
    let start = Instant::now();
    // The slot is granted once a quorum has applied it.
    while entries_on(&cluster, "semaphore/rel/permit/") < 2 {
        assert!(start.elapsed() < Duration::from_secs(2), "no slot granted");
        sleep(Duration::from_millis(1)).await;
    }
    // The line's release is on its way (in injected latency): the lockers
    // die before they answer it.
    cluster.crash(&[0, 1, 2]).unwrap();
    let mut seen = Vec::new();
    while !acquire.is_finished() {
        seen.push(sem.waiting().map(|status| status.reason()));
        sleep(Duration::from_millis(50)).await;
    }
    let result = acquire.await.unwrap();
    eprintln!("result after {:?}: {result:?}", start.elapsed());
    let Err(err) = result else {
        panic!("expected acquire_timeout to give up, got a permit");
    };
    assert!(
        matches!(err, Error::QuorumUnavailable { .. }),
        "the lockers are all down: {err:?}"
    );
    assert!(
        seen.iter().all(Option::is_none),
        "every lock is granted; the acquire only confirms the line's release, yet waiting() \
         said, every 50 ms: {seen:?}"
    );
}
