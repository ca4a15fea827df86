//! Reproduces a past break: the release of a guard dropped on a runtime that is then no longer driven is never sent: `finish_releases` on another runtime waits out its bound and every locker keeps the entry.
//!
//! docs/guarantees.md, "Any runtime": "So an acquiring runtime that is idle
//! or gone holds nothing up", and "One thing waits for a runtime that is no
//! longer driven: the safety margin of a lost lock whose loss was declared
//! there, while its holder still holds the guard." `Dsync::finish_releases`:
//! waits "until every release this client ... handed to the background has
//! finished: ... guards dropped without `unlock()`". README: a process about
//! to exit "calls `ds.finish_releases(bound)` after dropping its guards ...
//! so that nothing it held blocks others until it expires".
//!
//! The scene: every locker answers 50 ms late. On runtime `idle` (real
//! clock), "y" is taken and its guard dropped as the runtime's `block_on`
//! returns (the common shape of a blocking caller); the runtime is kept but
//! no longer driven, so its release task never runs. Another runtime calls
//! `finish_releases`: nothing sends the release, and the call waits its
//! whole bound while the three lockers keep y.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::Timeouts;

const SEED: u64 = 4405;

#[test]
fn finish_releases_sends_the_release_of_a_guard_dropped_on_a_runtime_no_longer_driven() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let ds = common::with_timeouts(
        cluster.net_lockers(),
        SEED,
        Timeouts {
            unlock: Duration::from_millis(500),
            ..Timeouts::default()
        },
    );
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(50)), &[0, 1, 2])
        .expect("valid latency");

    let idle = common::runtime();
    let uid = idle.block_on(async {
        let guard = common::try_lock(&ds, "y").await;
        let uid = guard.uid().to_owned();
        drop(guard);
        uid
    });
    assert!(
        common::holding(cluster.lockers(), &uid).iter().all(|h| *h),
        "the release has not reached any locker yet"
    );

    let (finished, left) =
        common::finish_elsewhere(&ds, cluster.lockers(), &uid, Duration::from_secs(2));
    assert!(
        !left.iter().any(|h| *h) && finished.is_ok(),
        "every locker answers within 50 ms, yet after finish_releases ({finished:?}) the lockers \
         holding y are {left:?}: the release of the dropped guard waits on a runtime no longer \
         driven, and nothing else sends it"
    );
    drop(idle);
}
