//! Reproduces a past break: a fencing draw whose call to a locker failed with a refused connection did not name that locker at all once another lock's call had been refused there for quarantine and that quarantine had run out, though the draw got no answer from it.
//!
//! `Error::QuorumUnavailable` names "each locker that did not answer and
//! why". docs/guarantees.md ("Why a wait waits"): only "a refusal of the
//! round being judged" for quarantine whose time has passed "is not named";
//! a round's failure of another kind that is over already still left the
//! round without the locker, for the reason it gave (`WaitStatus::of_round`).
//!
//! Three lockers, quorum two. `h` holds "r". Node 1 restarted (quarantine
//! 60 s); 100 ms before its end node 1 refuses connections and node 2
//! hangs. A fencing draw for "r" gets a token from node 0 and a refused
//! connection from node 1 at once, then waits for node 2 until its deadline.
//! 20 ms into the draw node 1 takes connections again, and a try_lock of
//! "x" is refused there for quarantine ("for another 80ms"). When the draw
//! stops, node 1 never answered it: its refused connection is why. The
//! same scenario where node 1's later answer is not a quarantine refusal
//! (node 1 not restarted) names node 1 with "connection refused".
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::Error;
use tokio::time::{sleep, Instant};

const SEED: u64 = 19_001;

#[tokio::test(start_paused = true)]
async fn fencing_draw_names_a_locker_that_refused_its_connection_before_a_quarantine_ran_out() {
    eprintln!("seed {SEED}");
    let start = Instant::now();
    let cluster = TestCluster::new(3, SEED);
    let h = common::seeded(cluster.net_lockers(), "h", SEED);
    let guard = tokio::time::timeout(Duration::from_secs(5), h.rw_mutex(["r"]).unwrap().lock())
        .await
        .expect("a free lock is granted")
        .unwrap();
    // Quarantine of the default 60 s.
    cluster.restart(&[1]).unwrap();
    sleep(Duration::from_millis(59_900)).await;
    assert!(!guard.is_lost(), "nodes 0 and 2 keep the lock");
    cluster.set_refuse(true, &[1]).unwrap();
    cluster.set_hang(true, &[2]).unwrap();

    let other = h.rw_mutex(["x"]).unwrap();
    let side = async {
        sleep(Duration::from_millis(20)).await;
        cluster.set_refuse(false, &[1]).unwrap();
        let tried = tokio::time::timeout(Duration::from_millis(50), other.try_lock()).await;
        eprintln!(
            "try_lock of 'x' at {:?}: {:?}",
            start.elapsed(),
            tried.as_ref().map(|r| r.as_ref().map(|_| ()))
        );
        // Kept to the end of the draw.
        tried
    };
    let (drawn, _tried) = tokio::join!(
        tokio::time::timeout(Duration::from_secs(30), guard.fencing_token()),
        side
    );
    let drawn = drawn.expect("the draw ends at its deadline");
    let in_quarantine = cluster.lockers()[1].is_quarantined();
    eprintln!(
        "draw ended at {:?}: {drawn:?}; node 1 in quarantine: {in_quarantine}",
        start.elapsed()
    );
    assert!(
        !in_quarantine,
        "the state this test means: node 1's quarantine over when the draw stops"
    );
    let Err(Error::QuorumUnavailable {
        answered,
        unreachable,
        ..
    }) = &drawn
    else {
        panic!("node 0 drew a token, node 1 refused the connection, node 2 is silent: {drawn:?}");
    };
    assert!(
        unreachable.iter().any(|u| u.endpoint == "node-1"),
        "node 1 never answered the draw (its connection was refused): it must be named; \
         {answered} answered: {drawn:?}"
    );
    drop(guard);
}
