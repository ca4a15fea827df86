//! Reproduces a past break: a `leader()` read decided by a quorum leaves its call to a hung locker on the runtime it ran on, counted among the outstanding releases; once that runtime is no longer driven, `finish_releases` on another waits out its bound and fails with `ReleasesPending`, though no release was ever made.
//!
//! docs/guarantees.md, "Any runtime": "So an acquiring runtime that is idle
//! or gone holds nothing up." `Dsync::finish_releases`: "Waits ... until
//! every release this client (and its clones) handed to the background has
//! finished ... Fails with [`Error::ReleasesPending`] when releases are
//! still running at the bound". A release's own calls left running are
//! recorded on the lockers' queues so that a task that never runs holds
//! nothing up (`CallSet::hand_off_owed`); an election's calls are still
//! counted as outstanding releases (`Handoff::Counted`), forever once
//! their runtime stops being driven.
//!
//! The scene: three lockers, locker 2 hangs. On runtime `idle` (real
//! clock), `leader()` is read: lockers 0 and 1 answer that nobody leads, a
//! write quorum, and the read returns `None`, its call to locker 2 handed
//! to `idle`. `idle` is then no longer driven. Nothing was locked, nothing
//! is owed; `finish_releases(1 s)` on another runtime still fails.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;

const SEED: u64 = 5002;

#[test]
fn finish_releases_is_not_held_up_by_a_leader_read_left_on_a_runtime_no_longer_driven() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let nodes = cluster.nodes();
    let ds = common::client(cluster.net_lockers(), SEED);
    nodes[2].set_hang(true);

    let idle = common::runtime();
    let leader = idle.block_on(async {
        let election = ds.election("jobs").expect("a valid name");
        tokio::time::timeout(Duration::from_secs(5), election.leader())
            .await
            .expect("two of three answer at once")
    });
    assert!(
        matches!(leader, Ok(None)),
        "a write quorum says nobody leads: {leader:?}"
    );
    nodes[2].set_hang(false);

    let finished = common::runtime().block_on(ds.finish_releases(Duration::from_secs(1)));
    assert!(
        finished.is_ok(),
        "nothing was locked or released, yet finish_releases(1 s) on another runtime returns \
         {finished:?}: the leader read's call to locker 2, left on a runtime no longer driven, \
         is counted as a release still running and never ends"
    );
    drop(idle);
}
