//! Reproduces a past break: a proclamation that a quorum of lockers answered, two of them saying the leader holds nothing there, gave up with `QuorumUnavailable` counting a quorum as answered ("too few lockers answered" with `answered == quorum`), as the fencing draw did before ed43fc2.
//!
//! docs: `Error::QuorumUnavailable` is for "when too few lockers answer"
//! ("naming each locker that did not answer and why"); its rustdoc: "Fewer
//! lockers answered than the quorum needs". The fencing draw fixed in
//! ed43fc2 counts as answered only lockers that drew a token: one that does
//! not hold the lock vouches for nothing. A proclamation is stored only with
//! the leader's entry, so a locker that says "not held" stored nothing.
//!
//! Five lockers, quorum three. `h` leads "e". Another client, cut off from
//! nodes 2, 3 and 4, forces "election/e" open: the entries on nodes 0 and
//! 1 are gone. Nodes 3 and 4 then refuse connections. `h`'s proclamation
//! is stored by node 2, answered "not held" by nodes 0 and 1 (no more than
//! a quorum can spare, so not a loss), and refused by nodes 3 and 4.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Error};

const SEED: u64 = 16_053;

#[tokio::test(start_paused = true)]
async fn proclamation_short_of_stores_with_a_quorum_answering() {
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
    let mut leading = tokio::time::timeout(
        Duration::from_secs(5),
        h.election("e").unwrap().campaign(&b"v1"[..]),
    )
    .await
    .expect("a free election is won")
    .unwrap();
    cluster.partition("f", &[2, 3, 4]).unwrap();
    let forced = tokio::time::timeout(Duration::from_secs(10), f.force_unlock(["election/e"]))
        .await
        .expect("the forced unlock ends");
    eprintln!("forced unlock cut off from nodes 2-4: {forced:?}");
    cluster.set_refuse(true, &[3, 4]).unwrap();

    let proclaimed = tokio::time::timeout(Duration::from_secs(10), leading.proclaim(&b"v2"[..]))
        .await
        .expect("the proclamation ends");
    eprintln!("proclamation: {proclaimed:?}");
    if let Err(Error::QuorumUnavailable {
        answered, quorum, ..
    }) = &proclaimed
    {
        assert!(
            answered < quorum,
            "QuorumUnavailable says too few lockers answered, yet counts {answered} of {quorum}: \
             {proclaimed:?}"
        );
    }
    drop(leading);
}
