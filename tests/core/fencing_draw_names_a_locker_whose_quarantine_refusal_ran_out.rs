//! Reproduces a past break: a fencing draw that stopped short after a locker refused it for quarantine and that quarantine's time ran out named the locker as one that did not answer, with its stale refusal as why, and did not count its answer.
//!
//! `Error::QuorumUnavailable`: `answered` is "lockers that gave an answer
//! (grant or refusal) in time", `unreachable` "the lockers that did not
//! answer". docs/guarantees.md ("Why a wait waits"): a refusal for
//! quarantine "stands until the time it said was left has passed"; a
//! fencing draw "judges each locker it did not get a useful answer from by
//! the same rules as a wait" (a wait counts a locker whose refusal of its
//! round is over as still answering, never as unreachable). While the
//! refusal stands, the same draw counts node 1 as answered (in
//! quarantine); once its time has passed, it names node 1 as unreachable.
//!
//! Three lockers, quorum two. `h` holds "r". Node 1 restarted 60 s less
//! 30 ms ago (its quarantine has 30 ms left) and node 2 hangs. A fencing
//! draw for "r" gets a token from node 0 and a refusal for quarantine
//! ("for another 30ms") from node 1 at once, and waits for node 2 until its
//! deadline (5 s): it stops short, with node 2 silent and node 1 out of
//! quarantine for almost 5 s.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_fencing_draw::Holder;
use quorum_lock::testing::TestCluster;
use quorum_lock::Error;
use tokio::time::sleep;

const SEED: u64 = 17_002;

#[tokio::test(start_paused = true)]
async fn fencing_draw_names_a_locker_whose_quarantine_refusal_ran_out() {
    let cluster = TestCluster::new(3, SEED);
    let Holder {
        h: _h,
        start,
        guard,
    } = Holder::of(&cluster, SEED).await;
    // Quarantine of the default 60 s.
    cluster.restart(&[1]).unwrap();
    sleep(Duration::from_millis(59_970)).await;
    assert!(!guard.is_lost(), "nodes 0 and 2 keep the lock");
    cluster.set_hang(true, &[2]).unwrap();

    let drawn = tokio::time::timeout(Duration::from_secs(30), guard.fencing_token())
        .await
        .expect("the draw ends at its deadline");
    let ended = start.elapsed();
    let in_quarantine = cluster.lockers()[1].is_quarantined();
    eprintln!("draw ended at {ended:?}: {drawn:?}; node 1 in quarantine: {in_quarantine}");
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
        panic!("node 0 drew a token, node 1 is out of quarantine, node 2 is silent: {drawn:?}");
    };
    assert!(
        !unreachable.iter().any(|u| u.endpoint == "node-1"),
        "node 1 answered the draw at once (a refusal for quarantine, whose time has since \
         passed): it is no locker that did not answer; {answered} answered: {drawn:?}"
    );
    drop(guard);
}
