//! What `Error::QuorumUnavailable` says when some lockers were refused at
//! once and the others have not answered yet. Its rustdoc (src/error.rs):
//!
//! > `answered`: Lockers that gave an answer (grant or refusal) in time.
//! > `unreachable` names each locker that did not answer and why.
//!
//! and its message: "only {answered} of {lockers} lockers answered".
//! Five lockers (a write quorum is 3): lockers 0, 1 and 2 refuse
//! connections, lockers 3 and 4 take 300 ms to answer. Before 3 and 4 have
//! answered, the error counts them as having answered and names neither,
//! because they count as "still answering".
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error};

const SEED: u64 = 6204;

async fn client_with_three_refusing_and_two_slow() -> (TestCluster, Dsync) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(5, SEED);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(300)), &[3, 4])
        .unwrap();
    let client = common::seeded(cluster.net_lockers(), "h", SEED);
    // The client hears lockers 3 and 4 take 300 ms.
    let warm = client.rw_mutex(["warm-up"]).unwrap();
    warm.lock().await.unwrap().unlock().await.unwrap();
    // The calls to 3 and 4 finish after the quorum of 0, 1, 2 decided.
    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.set_refuse(true, &[0, 1, 2]).unwrap();
    (cluster, client)
}

fn assert_counts_only_answers(result: &Result<impl std::fmt::Debug, Error>) {
    eprintln!("result: {result:?}");
    match result {
        Err(Error::QuorumUnavailable {
            answered,
            unreachable,
            ..
        }) => {
            assert_eq!(*answered, 0, "no locker answered in time: {result:?}");
            let named: Vec<&str> = unreachable.iter().map(|u| u.endpoint.as_str()).collect();
            assert!(
                named.contains(&"node-3") && named.contains(&"node-4"),
                "lockers that did not answer are not named: {result:?}"
            );
        }
        other => panic!("expected QuorumUnavailable, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn lock_timeout_before_slow_lockers_answer_counts_them_as_not_answered() {
    let (_cluster, client) = client_with_three_refusing_and_two_slow().await;
    let result = client
        .rw_mutex(["free"])
        .unwrap()
        .lock_timeout(Duration::from_millis(200))
        .await
        .map(drop);
    assert_counts_only_answers(&result);
}

#[tokio::test(start_paused = true)]
async fn try_lock_decided_before_slow_lockers_answer_counts_them_as_not_answered() {
    let (_cluster, client) = client_with_three_refusing_and_two_slow().await;
    let result = client
        .rw_mutex(["free"])
        .unwrap()
        .try_lock()
        .await
        .map(drop);
    assert_counts_only_answers(&result);
}
