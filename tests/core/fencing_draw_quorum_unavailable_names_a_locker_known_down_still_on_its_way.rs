//! Reproduces a past break: a fencing draw that stopped early counted a locker known down (another lock's call found its connection refused, no answer since) whose draw call was still on its way as not answering, yet its `QuorumUnavailable` did not name it, where a wait in the same state does.
//!
//! docs/guarantees.md ("Why a wait waits"): `Error::QuorumUnavailable`
//! names "each locker that did not answer and why"; for lockers "that have
//! not answered yet, the latest failure any call of this client noted for
//! that locker since it last answered" counts ("so a locker another lock's
//! call just found down counts as down, even while this wait's own call to
//! it is on its way"); "so do a fencing draw and a proclamation".
//!
//! Five lockers, quorum three. `h` holds "r". Node 4 refuses connections
//! while a try_lock of "x" asks it, then takes 1 s to answer anything.
//! Nodes 1, 2 and 3 refuse connections. A fencing draw for "r" gets a
//! token from node 0, three refused connections, and stops with its call
//! to node 4 on its way (10 ms after that refusal): node 4 counts as failing (it is not counted as
//! answering), so it must be named with its failure. A lock wait in that
//! state (deadline 50 ms) names nodes 1 to 4.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_fencing_draw::Holder;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::Error;

const SEED: u64 = 16_052;

#[tokio::test(start_paused = true)]
async fn fencing_draw_quorum_unavailable_names_a_locker_known_down_still_on_its_way() {
    let cluster = TestCluster::new(5, SEED);
    let held = Holder::of(&cluster, SEED).await;

    cluster.set_refuse(true, &[4]).unwrap();
    let x = held.try_x("with node 4 refusing").await;
    // Kept to the end: its release would ask node 4 again.
    let _x = x;
    cluster.set_refuse(false, &[4]).unwrap();
    cluster
        .set_latency(Latency::Fixed(Duration::from_secs(1)), &[4])
        .unwrap();
    cluster.set_refuse(true, &[1, 2, 3]).unwrap();
    // The draw begins a moment after node 4 was found down.
    tokio::time::sleep(Duration::from_millis(10)).await;

    let drawn = held.draw().await;

    let waited = held.a_plain_wait(Duration::from_millis(50)).await;

    let named = |err: &Result<_, Error>| match err {
        Err(Error::QuorumUnavailable { unreachable, .. }) => {
            let mut names: Vec<String> = unreachable.iter().map(|u| u.endpoint.clone()).collect();
            names.sort();
            Some(names)
        }
        _ => None,
    };
    assert_eq!(
        named(&waited),
        Some(
            ["node-1", "node-2", "node-3", "node-4"]
                .map(str::to_owned)
                .to_vec()
        ),
        "the state this test means: node 0 answers, nodes 1 to 4 out of reach: {waited:?}"
    );
    assert_eq!(
        named(&drawn.clone().map(|_token| ())),
        Some(
            ["node-1", "node-2", "node-3", "node-4"]
                .map(str::to_owned)
                .to_vec()
        ),
        "node 4 did not answer the draw and its refused connection stands: {drawn:?}"
    );
    drop(held);
}
