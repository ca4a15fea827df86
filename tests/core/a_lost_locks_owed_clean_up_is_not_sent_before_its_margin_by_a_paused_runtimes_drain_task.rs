//! Reproduces a past break: a lost lock's owed clean-up, queued when its declaring runtime shut down, was sent by a drain task that `finish_releases` started on a runtime with a paused clock, at once and long before the safety margin had passed, while the holder still held its guard.
//!
//! docs/guarantees.md, "A lost lock is freed once its holder lets go": the
//! entries of a lost lock go a safety margin after the loss is declared,
//! or at once when the holder lets go, and "from the declaration on, every
//! unlock of that lock waits for the margin or the holder, whatever sends
//! it". "Any runtime": "a lost lock's clean-up (sent once the safety margin
//! has passed or its holder let go, as the task would have)", and "What is
//! queued from a drop inside a runtime is drained on that runtime, on its
//! clock (a test's paused clock too: an unlock sent on another clock would
//! free a name at a moment the test did not choose)". docs/testing.md:
//! "only what a runtime leaves queued when it shuts down (an unlock still
//! owed) is taken over by a runtime the `Dsync` keeps, on the real clock".
//!
//! The scene: "x" is taken on runtime X (real clock), lockers 0 and 1 are
//! forced open, X's lane declares the loss, and X shuts down while the
//! clean-up waits out its 2 s margin: its unlocks are queued, due 2 s
//! after the loss on the real clock, the holder still holding the guard.
//! Another runtime, with tokio's paused clock, calls `finish_releases`.
//! Its drain task takes the whole queue and weighs the held-off unlocks
//! against its own clock, which it runs forward as it likes: the unlock
//! reaches locker 2 a few milliseconds after the loss.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Lease, LockArgs, LockerConfig, NetLocker};

use crate::common::{self, holding};

const SEED: u64 = 4301;

#[test]
fn a_lost_locks_owed_clean_up_is_not_sent_before_its_margin_by_a_paused_runtimes_drain_task() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::with_config(
        3,
        SEED,
        LockerConfig {
            validity: Duration::from_secs(10),
            ..LockerConfig::default()
        },
    );
    let ds = Dsync::builder(cluster.net_lockers())
        .owner("a")
        .rng_seed(SEED)
        .lease(Lease {
            validity: Duration::from_secs(10),
            safety_margin: Duration::from_secs(2),
            refresh_interval: Duration::from_millis(100),
        })
        .build()
        .expect("valid coordinator");

    let x = common::runtime();
    let (guard, seen) = x.block_on(async {
        let guard = common::try_lock_x(&ds).await;
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
        (guard, Instant::now())
    });
    assert!(guard.is_lost(), "the lane declared the loss");
    // The clean-up still waits out its margin: X's end queues its unlocks.
    x.shutdown_timeout(Duration::from_secs(1));
    let uid = guard.uid().to_owned();
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [false, false, true],
        "locker 2 still holds the lost lock's entry, within the margin"
    );

    // A test runtime on tokio's paused clock waits for the releases, the
    // holder still holding its guard.
    let paused = common::paused_runtime();
    let finished = paused.block_on(ds.finish_releases(Duration::from_secs(5)));
    let left = holding(cluster.lockers(), &uid);
    let at = seen.elapsed();
    eprintln!(
        "{at:?} after the loss, the guard held: finish_releases {finished:?}, lockers holding \
         the uid {left:?}"
    );
    if at < Duration::from_millis(1500) {
        assert!(
            left[2],
            "{at:?} after the loss (2 s margin on the real clock), the holder still holding its \
             guard, locker 2 no longer holds the lost lock's entry: the owed clean-up was sent \
             by the paused runtime's drain task on its own clock ({finished:?})"
        );
    } else {
        eprintln!("too slow to judge: {at:?} after the loss");
    }
    drop(guard);
}
