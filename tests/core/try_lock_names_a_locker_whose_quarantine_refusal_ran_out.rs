//! Reproduces a past break: a `try_lock` that too few lockers answered named a locker that had refused it at once for quarantine, whose stated time then ran out before the round ended, as one with "no answer yet", where a fencing draw in the same state names it not at all.
//!
//! `Error::QuorumUnavailable`: `unreachable` is "the lockers that did not
//! answer, each with why". docs/guarantees.md ("Why a wait waits"): a
//! refusal for quarantine "stands until the time it said was left has
//! passed"; a fencing draw judges its lockers "by the same rules as a wait,
//! with the same code", and one that refused it for quarantine whose time
//! has since passed is neither counted as answered nor named unreachable
//! (`fencing_draw_names_a_locker_whose_quarantine_refusal_ran_out`).
//!
//! Three lockers, quorum two. Node 1 restarted 60 s less 5 ms ago (its
//! quarantine has 5 ms left); nodes 0 and 2 are down (calls to them hang).
//! A `try_lock` on "r" is refused by node 1 at once ("for another 5ms") and
//! waits for nodes 0 and 2 until its deadline (1 s): it ends with
//! `QuorumUnavailable`, and names node 1, which answered at once, as having
//! given "no answer yet after 1.0s".
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::Error;
use tokio::time::{sleep, Instant};

const SEED: u64 = 18_002;

#[tokio::test(start_paused = true)]
async fn try_lock_names_a_locker_whose_quarantine_refusal_ran_out() {
    eprintln!("seed {SEED}");
    let start = Instant::now();
    let cluster = TestCluster::new(3, SEED);
    let h = common::seeded(cluster.net_lockers(), "h", SEED);
    // Quarantine of the default 60 s.
    cluster.restart(&[1]).unwrap();
    sleep(Duration::from_millis(59_995)).await;
    cluster.crash(&[0, 2]).unwrap();
    let mutex = h.rw_mutex(["r"]).unwrap();
    let tried = tokio::time::timeout(Duration::from_secs(30), mutex.try_lock())
        .await
        .expect("the round ends at its deadline")
        .map(|_guard| ());
    let ended = start.elapsed();
    let in_quarantine = cluster.lockers()[1].is_quarantined();
    eprintln!("try_lock ended at {ended:?}: {tried:?}; node 1 in quarantine: {in_quarantine}");
    assert!(
        !in_quarantine,
        "the state this test means: node 1's quarantine over when the round ends"
    );
    let Err(Error::QuorumUnavailable { unreachable, .. }) = &tried else {
        panic!("nodes 0 and 2 are down, node 1 refused for quarantine: {tried:?}");
    };
    assert!(
        !unreachable.iter().any(|u| u.endpoint == "node-1"),
        "node 1 answered the round at once (a refusal for quarantine, whose time has since \
         passed): it is no locker that did not answer: {tried:?}"
    );
}
