//! Why `Semaphore::acquire_timeout` gives up when every permit is held by
//! another client, every locker is up and answers within 10 ms, and the
//! deadline lands around the moment the head of the line starts waiting on
//! the slots. The rustdoc of `acquire_timeout`: "`Error::Timeout` when the
//! permits (or the line) were held elsewhere"; docs/guarantees.md: a
//! locker counts as unreachable when it "has not answered within the
//! wait's deadline ... a deadline shorter than a round trip says so rather
//! than blaming a holder" (these deadlines are several round trips long,
//! and every locker answered each call within one).
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error};

const SEED: u64 = 4246;

fn client(cluster: &TestCluster, owner: &str) -> Dsync {
    common::seeded(cluster.net_lockers(), owner, SEED)
}

async fn give_up_after(timeout: Duration) -> Result<(), Error> {
    let cluster = TestCluster::new(3, SEED);
    let other = client(&cluster, "other");
    let h = client(&cluster, "h");
    let held = other.semaphore("full", 1).unwrap().acquire().await.unwrap();
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(10)), &[0, 1, 2])
        .unwrap();
    let result = h
        .semaphore("full", 1)
        .unwrap()
        .acquire_timeout(timeout)
        .await
        .map(drop);
    drop(held);
    result
}

#[tokio::test(start_paused = true)]
async fn acquire_timeout_behind_held_permits_says_timeout_for_deadlines_of_a_few_round_trips() {
    eprintln!("seed {SEED}");
    let mut wrong = Vec::new();
    for ms in 25..120u64 {
        match give_up_after(Duration::from_millis(ms)).await {
            Err(Error::Timeout) => {}
            other => wrong.push((ms, format!("{other:?}"))),
        }
    }
    assert!(
        wrong.is_empty(),
        "the only permit is held by another client and every locker answers within 10 ms, \
         yet {} deadlines (ms: {:?}) gave another error, the first: {:?}",
        wrong.len(),
        wrong.iter().map(|(ms, _)| *ms).collect::<Vec<_>>(),
        wrong.first()
    );
}
