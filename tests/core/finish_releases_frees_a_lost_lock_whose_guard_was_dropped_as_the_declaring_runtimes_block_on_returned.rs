//! Reproduces a past break: a lost lock's guard dropped on the runtime that declared the loss, as its `block_on` returns, leaves the entry on the locker still holding it: the clean-up the drop claims is spawned on that runtime, no longer driven, and `finish_releases` on another runtime waits out its bound.
//!
//! docs/guarantees.md, "Any runtime": "One thing waits for a runtime that
//! is no longer driven: the safety margin of a lost lock whose loss was
//! declared there, while its holder still holds the guard. The entries then
//! go when the holder lets go (on whatever runtime, or none), or expire",
//! and "A release a runtime began and then stopped driving (a guard dropped
//! as its `block_on` returns, ...) is recorded on the lockers' queues as
//! on its way; once overdue ..., any other drain task or `finish_releases`
//! sends it again". "A lost lock is freed once its holder lets go": "As
//! soon as the holder drops its guard ... they go at once". The guard's
//! drop claims the clean-up (`clean_up_after_holder`) and spawns it on the
//! current runtime, counted as outstanding and recorded on no queue.
//!
//! The scene (real clock, as the runtime must stop being driven): "x" is
//! taken on runtime X (validity 6 s, margin 2 s, a refresh every 100 ms);
//! lockers 0 and 1 are forced open by name, X's lane declares the loss,
//! and the guard is dropped as X's `block_on` returns; X is kept, never
//! driven again. Locker 2, answering all along, still holds the entry (it
//! expires only 6 s after the last refresh). On another runtime
//! `finish_releases(1.5 s)` should free it.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Lease, LockArgs, LockerConfig, NetLocker};

use crate::common::{self, holding};

const SEED: u64 = 47_004;

#[test]
fn finish_releases_frees_a_lost_lock_whose_guard_was_dropped_as_the_declaring_runtimes_block_on_returned(
) {
    eprintln!("seed {SEED}");
    let validity = Duration::from_secs(6);
    let cluster = TestCluster::with_config(
        3,
        SEED,
        LockerConfig {
            validity,
            ..LockerConfig::default()
        },
    );
    let ds = Dsync::builder(cluster.net_lockers())
        .owner("a")
        .rng_seed(SEED)
        .lease(Lease {
            validity,
            safety_margin: Duration::from_secs(2),
            refresh_interval: Duration::from_millis(100),
        })
        .build()
        .expect("valid coordinator");
    let x = common::runtime();
    let (uid, seen) = x.block_on(async {
        let guard = common::try_lock_x(&ds).await;
        let uid = guard.uid().to_owned();
        let forced = LockArgs {
            uid: "".into(),
            resources: vec!["x".to_string()].into(),
            owner: "admin".into(),
            source: "test".into(),
            quorum: 1,
        };
        for locker in &cluster.lockers()[..2] {
            let forced = NetLocker::force_unlock(&**locker, &forced)
                .await
                .expect("a local force-unlock");
            assert!(forced, "the entry was forced open");
        }
        tokio::time::timeout(Duration::from_secs(2), guard.lost())
            .await
            .expect("the loss is declared within a few refreshes");
        let seen = Instant::now();
        assert!(guard.is_lost(), "the lane declared the loss");
        // The holder lets go as `block_on` returns.
        drop(guard);
        (uid, seen)
    });
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [false, false, true],
        "locker 2 still holds the lost lock's entry"
    );

    let finished = common::runtime().block_on(ds.finish_releases(Duration::from_millis(1500)));
    let left = holding(cluster.lockers(), &uid);
    let at = seen.elapsed();
    eprintln!(
        "{at:?} after the loss, the guard dropped on X (idle since): finish_releases \
         {finished:?}, lockers holding the uid {left:?}"
    );
    assert!(
        at < Duration::from_millis(4500),
        "checked before the lockers could expire the entry: {at:?}"
    );
    assert!(
        finished.is_ok() && !left.iter().any(|h| *h),
        "the holder let go of the lost lock and every locker answers, yet finish_releases gave \
         {finished:?} with its entry still on {left:?}: the clean-up the drop claimed sits on \
         the idle runtime"
    );
    drop(x);
}
