//! What `Election::campaign_timeout` says when its deadline comes while
//! the term's draw, sent as the lock was granted, is on its way to
//! lockers that answer every call in 100 ms: 50 ms after it was sent.
//!
//! docs/guarantees.md ("Why a wait waits"): "`Error::Timeout` too when
//! lockers enough for a quorum were asked a moment ago and have not all
//! answered (`WaitReason::Answering`): the deadline came first, after a
//! few round trips, and nothing is known against the lockers", and "A
//! locker that has not answered counts as still answering for twice as
//! long as its latest answer took". Nothing is known against these
//! lockers: each answered the grant 50 ms before, in 100 ms. Naming all
//! three as unreachable ("answered 0") tells an operator the lockers are
//! down when they are answering.
//!
//! Reproduces a past break: it named all three lockers unreachable, 0 answered.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{CallKind, Latency, TestCluster};
use quorum_lock::Error;

const SEED: u64 = 2290;

#[tokio::test(start_paused = true)]
async fn campaign_timeout_while_the_term_is_on_its_way_is_not_quorum_unavailable() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let h = common::seeded(cluster.net_lockers(), "h", SEED);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[0, 1, 2])
        .unwrap();
    let election = h.election("e").unwrap();
    let result = election
        .campaign_timeout(b"v".to_vec(), Duration::from_millis(150))
        .await
        .map(|_leadership| ());
    eprintln!("result: {result:?}");
    let fence = cluster.stats(CallKind::Fence);
    assert_eq!(
        (fence.seen, fence.faulted),
        (3, 0),
        "the term's draw was sent to every locker, none faulted"
    );
    assert!(
        !matches!(result, Err(Error::QuorumUnavailable { .. })),
        "every locker answered the grant 50 ms before and is answering the term's draw, \
         yet campaign_timeout says: {result:?}"
    );
}
