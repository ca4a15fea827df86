//! Reproduces a past break: a fencing draw that a quorum of lockers answered, two of them saying the lock is not held there, gave up with `QuorumUnavailable` counting a quorum as answered ("too few lockers answered" with `answered == quorum`), and did not name node 4, whose refusal it stopped before reading.
//!
//! The rustdoc of `WriteGuard::fencing_token`: fails with
//! `Error::QuorumUnavailable` "when too few lockers answered". docs:
//! `Error::QuorumUnavailable` is for "when too few lockers answer"; its
//! rustdoc: "Fewer lockers answered than the quorum needs ... `unreachable`
//! names each locker that did not answer and why".
//!
//! Five lockers, quorum three. `h` holds "r". Another client, cut off
//! from nodes 2, 3 and 4, forces "r" open: the entries on nodes 0 and 1
//! are gone. Nodes 3 and 4 then refuse connections. `h`'s fencing draw
//! gets a token from node 2, "not held" from nodes 0 and 1 (no more than
//! a quorum can spare, so not `LockLost`), and connection refusals from
//! nodes 3 and 4.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Error};

const SEED: u64 = 5_303;

#[tokio::test(start_paused = true)]
async fn fencing_draw_short_of_tokens_with_a_quorum_answering() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(5, SEED);
    let h = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(SEED)
        .build()
        .unwrap();
    let f = Dsync::builder(cluster.net_lockers())
        .owner("f")
        .rng_seed(SEED + 1)
        .build()
        .unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(5), h.rw_mutex(["r"]).unwrap().lock())
        .await
        .expect("a free lock is granted")
        .unwrap();
    cluster.partition("f", &[2, 3, 4]).unwrap();
    let forced = tokio::time::timeout(Duration::from_secs(10), f.force_unlock(["r"]))
        .await
        .expect("the forced unlock ends");
    eprintln!("forced unlock cut off from nodes 2-4: {forced:?}");
    cluster.set_refuse(true, &[3, 4]).unwrap();

    let drawn = tokio::time::timeout(Duration::from_secs(10), guard.fencing_token())
        .await
        .expect("the draw ends");
    eprintln!("fencing draw: {drawn:?}");
    if let Err(Error::QuorumUnavailable {
        answered,
        quorum,
        unreachable,
        ..
    }) = &drawn
    {
        assert!(
            answered < quorum,
            "QuorumUnavailable says too few lockers answered, yet counts {answered} of {quorum}: \
             {drawn:?}"
        );
        for node in ["node-3", "node-4"] {
            assert!(
                unreachable.iter().any(|u| u.endpoint == node),
                "`unreachable` names each locker that did not answer and why; {node} refused \
                 the connection: {drawn:?}"
            );
        }
    }
    drop(guard);
}
