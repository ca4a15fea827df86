//! Reproduces a past break: a lost lock's clean-up that began on the declaring runtime and stalled there, a force-unlock on its way, when that runtime went idle stays counted among the outstanding releases for good: after the holder let go and every entry was freed, `finish_releases` on another runtime waits out its bound and fails with `ReleasesPending`.
//!
//! docs/guarantees.md, "Any runtime": "So an acquiring runtime that is idle
//! or gone holds nothing up", and "One thing waits for a runtime that is no
//! longer driven: the safety margin of a lost lock whose loss was declared
//! there, while its holder still holds the guard. The entries then go when
//! the holder lets go". `Dsync::finish_releases` fails with
//! `ReleasesPending` "when releases are still running at the bound (a lock
//! server is unreachable, say)".
//!
//! The scene (that of
//! `a_lost_lock_whose_clean_up_stalled_on_an_idle_runtime_is_freed_once_its_holder_lets_go`):
//! "x" is taken on runtime X, refreshed every 100 ms with a 2 s margin;
//! lockers 0 and 1 are forced open, X's lane declares the loss, and 2.3 s
//! later its clean-up has begun, counted, its force-unlock to locker 2
//! delivered 1 s late. X is then no longer driven. The holder unlocks on a
//! plain thread: its own clean-up frees locker 2. Every entry is gone, every
//! locker answers; `finish_releases(2 s)` on another runtime still fails,
//! counting the clean-up stalled on X.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::executor::block_on;
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, Error, Lease, LockArgs, LockerConfig, NetLocker};

use crate::common::{self, holding};

const SEED: u64 = 5003;

#[test]
fn finish_releases_is_not_held_up_by_a_lost_locks_clean_up_stalled_on_an_idle_runtime_once_its_holder_let_go(
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
    // Locker 2's first force-unlock is delivered 1 s late.
    let first_done = Arc::new(AtomicBool::new(false));
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            if i != 2 {
                return l;
            }
            let first_done = first_done.clone();
            Arc::new(Relay::new(l, move |kind, _| {
                if kind == CallKind::ForceUnlock && !first_done.swap(true, Ordering::SeqCst) {
                    Route::Late(Duration::from_secs(1))
                } else {
                    Route::Forward
                }
            })) as Arc<dyn NetLocker>
        })
        .collect();
    let ds = Dsync::builder(lockers)
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
    let guard = x.block_on(async {
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
        // Past the margin: the clean-up has begun, its force-unlock to
        // locker 2 on its way.
        tokio::time::sleep(Duration::from_millis(2300)).await;
        guard
    });
    let uid = guard.uid().to_owned();
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [false, false, true],
        "locker 2 still holds the entry; the force-unlock to it is on its way"
    );
    // X is kept but no longer driven. The holder lets go.
    let unlocked = block_on(guard.unlock());
    assert!(
        matches!(unlocked, Err(Error::LockLost)),
        "unlock says the lock was lost: {unlocked:?}"
    );
    let (finished, left) =
        common::finish_elsewhere(&ds, cluster.lockers(), &uid, Duration::from_secs(2));
    assert!(
        !left.iter().any(|h| *h),
        "the holder's clean-up freed every locker: {left:?}"
    );
    assert!(
        finished.is_ok(),
        "every entry is gone and every locker answers, yet finish_releases(2 s) returns \
         {finished:?}: the clean-up stalled on the idle runtime is still counted as a release \
         running, and never ends"
    );
    drop(x);
}
