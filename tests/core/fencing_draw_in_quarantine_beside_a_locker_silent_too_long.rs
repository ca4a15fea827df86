//! Reproduces a past break: a fencing draw that stopped only after seconds counted its call still on its way to a locker silent all that time as answering, and gave up with `Quarantined` where a wait in the same state, which counts that locker as out of reach, says `QuorumUnavailable`.
//!
//! docs/guarantees.md ("Why a wait waits"): "A locker that has not answered
//! counts as still answering for twice as long as its latest answer took,
//! and at least 100 ms ..., and as unreachable after that"; "when lockers
//! that refused such a call for quarantine would make the quorum with those
//! that answered, the operation gives up with `Quarantined`, as a wait does
//! (so do a fencing draw and a proclamation that find them so); with too
//! few of the others, the operation gives up with `QuorumUnavailable`".
//!
//! Five lockers, quorum three. `h` holds "r". Node 1 restarts (quarantine)
//! and takes 3 s to answer; nodes 2 and 3 refuse connections; node 4
//! hangs (it answered at once before). A fencing draw for "r" gets a token
//! from node 0 at once, two refused connections, and node 1's refusal for
//! quarantine after 3 s; it stops there with its call to node 4 silent for
//! 3 s, thirty times its patience: node 4 is out of reach, and node 0 with
//! node 1 make no quorum. A lock wait in that state (500 ms) gives up with
//! `QuorumUnavailable`.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_fencing_draw::Holder;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::Error;

const SEED: u64 = 16_054;

#[tokio::test(start_paused = true)]
async fn fencing_draw_in_quarantine_beside_a_locker_silent_too_long() {
    let cluster = TestCluster::new(5, SEED);
    let held = Holder::of(&cluster, SEED).await;

    cluster.restart(&[1]).unwrap();
    cluster
        .set_latency(Latency::Fixed(Duration::from_secs(3)), &[1])
        .unwrap();
    cluster.set_refuse(true, &[2, 3]).unwrap();
    cluster.set_hang(true, &[4]).unwrap();

    let drawn = held.draw().await;

    let waited = held.a_plain_wait(Duration::from_millis(500)).await;

    assert!(
        matches!(&waited, Err(Error::QuorumUnavailable { .. })),
        "the state this test means: node 0 answers, node 1 in quarantine, \
         nodes 2, 3 and 4 out of reach: {waited:?}"
    );
    assert!(
        matches!(&drawn, Err(Error::QuorumUnavailable { unreachable, .. })
            if unreachable.iter().any(|u| u.endpoint == "node-4")),
        "node 4 left the draw's call unanswered for 3 s: out of reach, so node 0 and \
         node 1 in quarantine make no quorum: {drawn:?}"
    );
    drop(held);
}
