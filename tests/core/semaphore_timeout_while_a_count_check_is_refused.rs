//! Why `Semaphore::acquire_timeout` gives up when the head of the line's
//! count check keeps being refused by a check held elsewhere (one left
//! behind by another acquirer), with every locker up and answering within
//! 10 ms. The rustdoc of `acquire_timeout`: "`Error::Timeout` when the
//! permits (or the line) were held elsewhere, `Error::Quarantined` or
//! `Error::QuorumUnavailable` when the lockers could not grant"; and
//! docs/guarantees.md: "`Error::Timeout` only when the lock is held
//! elsewhere and that alone keeps it from being granted ...
//! `Error::QuorumUnavailable`, naming each unreachable locker and why,
//! otherwise". Each attempt at the count is a new one-round try, so a
//! deadline that lands while one is in flight finds no answers yet.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error};

const SEED: u64 = 4242;

fn client(cluster: &TestCluster, owner: &str) -> Dsync {
    common::seeded(cluster.net_lockers(), owner, SEED)
}

/// One acquire_timeout of `timeout` against a check held elsewhere.
async fn give_up_after(timeout: Duration) -> Result<(), Error> {
    let cluster = TestCluster::new(3, SEED);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(10)), &[0, 1, 2])
        .unwrap();
    let other = client(&cluster, "other");
    let h = client(&cluster, "h");
    // One of the flipped digits of 2, which a count-2 check write-locks.
    let left_behind = other
        .rw_mutex(["semaphore/chk/count-bit/0/1"])
        .unwrap()
        .lock()
        .await
        .unwrap();
    let result = h
        .semaphore("chk", 2)
        .unwrap()
        .acquire_timeout(timeout)
        .await
        .map(drop);
    drop(left_behind);
    result
}

#[tokio::test(start_paused = true)]
async fn acquire_timeout_behind_a_count_check_held_elsewhere_says_timeout_whenever_it_gives_up() {
    eprintln!("seed {SEED}");
    let mut wrong = Vec::new();
    // Deadlines 1 ms apart around two attempts at the count.
    for ms in (90..140u64).chain(1180..1230) {
        match give_up_after(Duration::from_millis(ms)).await {
            Err(Error::Timeout) => {}
            other => wrong.push((ms, format!("{other:?}"))),
        }
    }
    assert!(
        wrong.is_empty(),
        "every locker is up and answers within 10 ms; only a check held elsewhere refuses, \
         yet {} of 100 deadlines (ms: {:?}) gave another error, the first: {:?}",
        wrong.len(),
        wrong.iter().map(|(ms, _)| *ms).collect::<Vec<_>>(),
        wrong.first()
    );
}
