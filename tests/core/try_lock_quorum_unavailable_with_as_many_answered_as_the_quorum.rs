//! Reproduces a past break: a `try_lock` granted by one locker, refused for quarantine by a second (still in it) and by a third whose refusal's time then ran out, failed with `QuorumUnavailable` saying as many lockers answered as the quorum needs, naming the third as having given "no answer yet", and not naming the second at all.
//!
//! `Error::QuorumUnavailable`'s `answered`: "Always below `quorum`";
//! `unreachable`: "the lockers that did not answer, each with why".
//! docs/guarantees.md ("Why a wait waits"): "`Error::Quarantined` (with
//! the time left) when lockers in quarantine after a restart are what
//! keeps a quorum from granting"; a fencing draw judges its lockers "by the
//! same rules as a wait, with the same code", and there a locker whose
//! refusal for quarantine ran out is neither answered nor unreachable.
//!
//! Three lockers, quorum two. Node 2 restarted 60 s less 5 ms ago; node 1
//! restarted a moment before the round (almost 60 s left) and answers 50 ms
//! late. A `try_lock` is granted by node 0 at once, refused by node 2 at
//! once ("for another 5ms") and by node 1 50 ms later: the round ends then,
//! with node 1 still in quarantine and node 2's refusal run out. Node 0's
//! grant and node 1 in quarantine make the quorum: quarantine is what
//! keeps the round from granting.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::Error;
use tokio::time::sleep;

const SEED: u64 = 18_004;

#[tokio::test(start_paused = true)]
async fn try_lock_quorum_unavailable_with_as_many_answered_as_the_quorum() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let h = common::seeded(cluster.net_lockers(), "h", SEED);
    // Quarantine of the default 60 s.
    cluster.restart(&[2]).unwrap();
    sleep(Duration::from_millis(59_900)).await;
    cluster.restart(&[1]).unwrap();
    sleep(Duration::from_millis(95)).await;
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(50)), &[1])
        .unwrap();
    let mutex = h.rw_mutex(["r"]).unwrap();
    let tried = tokio::time::timeout(Duration::from_secs(30), mutex.try_lock())
        .await
        .expect("one round")
        .map(|_guard| ());
    let in_quarantine: Vec<bool> = cluster
        .lockers()
        .iter()
        .map(|l| l.is_quarantined())
        .collect();
    eprintln!("try_lock: {tried:?}; lockers in quarantine: {in_quarantine:?}");
    assert_eq!(
        in_quarantine,
        [false, true, false],
        "the state this test means: node 1 in quarantine, node 2 out of it"
    );
    if let Err(Error::QuorumUnavailable {
        answered, quorum, ..
    }) = &tried
    {
        assert!(
            answered < quorum,
            "QuorumUnavailable's answered is always below the quorum: {tried:?}"
        );
    }
    assert!(
        matches!(&tried, Err(Error::Quarantined { quarantined, .. }) if quarantined == &["node-1"]),
        "node 0 granted, node 1 refused for quarantine (almost 60 s left) and node 2's \
         refusal ran out: quarantine keeps the quorum: {tried:?}"
    );
}
