//! Reproduces a past break: a fencing draw that stopped early counted a call still on its way to a locker known to be failing (its latest call timed out, no answer since) as answering, and gave up with `Quarantined` where a wait in the same state says `QuorumUnavailable`.
//!
//! docs/guarantees.md ("Why a wait waits"): a locker that has not answered
//! counts as still answering "... and as unreachable after that, or at
//! once when it never answered this client or a call to it failed since
//! it last did"; "when lockers that refused such a call for quarantine
//! would make the quorum with those that answered, the operation gives up
//! with `Quarantined`, as a wait does (so do a fencing draw and a
//! proclamation that find them so); with too few of the others, the
//! operation gives up with `QuorumUnavailable`".
//!
//! Three lockers, quorum two. `h` holds "r". Node 1 then refuses
//! connections and node 2 hangs; a wait on "other" leaves a call to node 2
//! timing out (a failure of node 2, which answers nothing after it). Then
//! node 0 refuses connections and node 1 restarts (in quarantine). A
//! fencing draw for "r" is refused for quarantine by node 1, fails on node
//! 0 and stops with its call to node 2 on its way: one locker in
//! quarantine, two out of reach, so too few of the others. A lock wait in
//! that state gives up with `QuorumUnavailable`.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_fencing_draw::Holder;
use quorum_lock::testing::TestCluster;
use quorum_lock::Error;

const SEED: u64 = 9_127;

#[tokio::test(start_paused = true)]
async fn fencing_draw_in_quarantine_beside_a_locker_known_down_still_on_its_way() {
    let cluster = TestCluster::new(3, SEED);
    let held = Holder::of(&cluster, SEED).await;

    cluster.set_refuse(true, &[1]).unwrap();
    cluster.set_hang(true, &[2]).unwrap();
    let other = held.h.rw_mutex(["other"]).unwrap();
    let first = tokio::time::timeout(
        Duration::from_secs(10),
        other.lock_timeout(Duration::from_millis(2_500)),
    )
    .await
    .expect("the wait ends at its deadline")
    .map(|_guard| ());
    eprintln!(
        "wait on 'other' with node 2 hanging gave up at {:?} with: {first:?}",
        held.start.elapsed()
    );
    // Let the calls of that wait end (their own deadline at most).
    tokio::time::sleep(Duration::from_secs(2)).await;

    cluster.set_refuse(true, &[0]).unwrap();
    cluster.set_refuse(false, &[1]).unwrap();
    cluster.restart(&[1]).unwrap();

    let drawn = held.draw().await;

    let waited = held.a_plain_wait(Duration::from_millis(900)).await;

    assert!(
        matches!(waited, Err(Error::QuorumUnavailable { .. })),
        "the state this test means: one in quarantine, two out of reach: {waited:?}"
    );
    assert!(
        matches!(drawn, Err(Error::QuorumUnavailable { .. })),
        "node 1 refuses the draw for quarantine, node 0 refuses connections, node 2's \
         latest call timed out and it answered nothing since: {drawn:?}"
    );
    drop(held);
}
