//! Reproduces a past break: a fencing draw that stopped early with its call still on its way to a locker whose refusal for quarantine stands counted that locker neither as answering nor as in quarantine, and gave up with `QuorumUnavailable` (not naming it) where a wait in the same state says `Quarantined`.
//!
//! docs/guarantees.md ("Why a wait waits"): for lockers "that have not
//! answered yet, the latest failure any call of this client noted for that
//! locker since it last answered" counts, and a refusal for quarantine
//! "stands until the time it said was left has passed, or until it answers
//! a call a locker in quarantine refuses"; "when lockers that refused such
//! a call for quarantine would make the quorum with those that answered,
//! the operation gives up with `Quarantined`, as a wait does (so do a
//! fencing draw and a proclamation that find them so)"; `QuorumUnavailable`
//! names "each locker that did not answer and why".
//!
//! Five lockers, quorum three. `h` holds "r". Node 4 restarts and refuses
//! a try_lock of "x" for quarantine; then its answers take 1 s. Node 1
//! restarts too, nodes 2 and 3 refuse connections. A fencing draw for "r"
//! gets a token from node 0, a refusal for quarantine from node 1 and two
//! refused connections, and stops with its call to node 4 a moment on its
//! way. Node 0 with nodes 1 and 4 in quarantine would make the quorum: a
//! lock wait in that state (deadline 50 ms, below any patience) gives up
//! with `Quarantined`, naming nodes 1 and 4.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_fencing_draw::Holder;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::Error;

const SEED: u64 = 16_051;

#[tokio::test(start_paused = true)]
async fn fencing_draw_in_quarantine_beside_a_locker_in_quarantine_still_on_its_way() {
    let cluster = TestCluster::new(5, SEED);
    let held = Holder::of(&cluster, SEED).await;

    cluster.restart(&[4]).unwrap();
    let x = held.try_x("with node 4 in quarantine").await;
    drop(x);
    tokio::time::sleep(Duration::from_millis(10)).await;

    cluster
        .set_latency(Latency::Fixed(Duration::from_secs(1)), &[4])
        .unwrap();
    cluster.restart(&[1]).unwrap();
    cluster.set_refuse(true, &[2, 3]).unwrap();

    let drawn = held.draw().await;

    let waited = held.a_plain_wait(Duration::from_millis(50)).await;

    assert!(
        matches!(&waited, Err(Error::Quarantined { quarantined, .. }) if quarantined.len() == 2),
        "the state this test means: node 0 answers, nodes 1 and 4 in quarantine, \
         nodes 2 and 3 out of reach: {waited:?}"
    );
    assert!(
        matches!(&drawn, Err(Error::Quarantined { .. })),
        "node 0 drew a token, node 1 refused the draw for quarantine and node 4's refusal \
         for quarantine stands while the draw's call to it is a moment on its way: \
         {drawn:?}"
    );
    drop(held);
}
