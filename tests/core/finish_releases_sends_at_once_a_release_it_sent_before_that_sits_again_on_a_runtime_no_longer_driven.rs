//! Reproduces a past break: an unlock `finish_releases` sent again once is marked hurried for good, so when its drain task later sits on a runtime no longer driven, the next `finish_releases` waits for it to be overdue (4.1 s) and returns `ReleasesPending` while the locker answers.
//!
//! `Dsync::finish_releases`: "A release whose task sits on a runtime that
//! is no longer driven (a guard dropped as its `block_on` returned) is sent
//! again from here, at once". docs/guarantees.md, "Any runtime": a release
//! a runtime began and then stopped driving ("a retry a drain task was
//! sending") "is recorded on the lockers' queues as on its way; once
//! overdue ... any other drain task sends it again, and `finish_releases`
//! sends a release's unlocks again at once, without waiting for them to be
//! overdue".
//!
//! The scene (real clock, 2 s unlock timeout, so a batch is overdue 4.1 s
//! after it is taken): on runtime `first`, "y" is taken, locker 2 hangs,
//! and the guard is dropped as `block_on` returns. `finish_releases(1 s)`
//! on runtime `second` sends the release again at once (lockers 0 and 1
//! take it); its drain task for locker 2 is left mid-call when it returns
//! `ReleasesPending`, and `second` is no longer driven. Locker 2 answers
//! again. `finish_releases(1 s)` on a third runtime should send locker 2's
//! unlock at once, as the first did; it does not: the copy it would take
//! back is marked as hurried already.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::Timeouts;

const SEED: u64 = 5201;

#[test]
fn finish_releases_sends_at_once_a_release_it_sent_before_that_sits_again_on_a_runtime_no_longer_driven(
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let nodes = cluster.nodes();
    let ds = common::with_timeouts(
        cluster.net_lockers(),
        SEED,
        Timeouts {
            unlock: Duration::from_secs(2),
            ..Timeouts::default()
        },
    );

    let first = common::runtime();
    let uid = first.block_on(async {
        let guard = common::try_lock(&ds, "y").await;
        let uid = guard.uid().to_owned();
        nodes[2].set_hang(true);
        drop(guard);
        uid
    });

    // The first finish_releases sends the release at once: lockers 0 and 1
    // take it; locker 2 hangs, so its drain task is mid-call at the bound.
    let second = common::runtime();
    let (finished, left) = {
        let finished = second.block_on(ds.finish_releases(Duration::from_secs(1)));
        (finished, common::holding(cluster.lockers(), &uid))
    };
    eprintln!("first finish_releases(1 s): {finished:?}; lockers holding the uid {left:?}");
    assert!(finished.is_err(), "control: locker 2 hangs");
    assert_eq!(
        left,
        vec![false, false, true],
        "control: the first finish_releases sent the release at once"
    );

    // Locker 2 answers again; `second` is no longer driven.
    nodes[2].set_hang(false);
    let (finished, left) =
        common::finish_elsewhere(&ds, cluster.lockers(), &uid, Duration::from_secs(1));
    assert!(
        finished.is_ok() && !left.iter().any(|h| *h),
        "locker 2 answers again, and the unlock it is owed sits with a drain task on a runtime \
         no longer driven, yet finish_releases(1 s) returned {finished:?} with the lockers \
         holding y {left:?}: it does not send that unlock at once, because an earlier \
         finish_releases sent it again once already (it waits for the batch to be overdue, \
         4.1 s after it was taken)"
    );
    drop(second);
    drop(first);
}
