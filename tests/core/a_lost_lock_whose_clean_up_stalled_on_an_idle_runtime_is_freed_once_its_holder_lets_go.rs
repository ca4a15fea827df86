//! Reproduces a past break: a lost lock whose clean-up had begun on the declaring runtime, and stalled there with a force-unlock still on its way when that runtime went idle, kept its entry on a locker that answers after its holder let go.
//!
//! docs/guarantees.md, "A lost lock is freed once its holder lets go": "As
//! soon as the holder drops its guard (or `unlock()` returns
//! `Error::LockLost`), they go at once instead"; "Any runtime": an
//! acquiring runtime that is idle or gone holds nothing up. (The known
//! limit is a holder that keeps its guard; this one lets go.)
//!
//! What happens instead: the lane on the acquiring runtime X declares the
//! loss (lockers 0 and 1 forced open) and spawns the clean-up there. X is
//! driven past the safety margin: the clean-up claims the work
//! (`LossSignal::claim_cleanup`) and sends its force-unlocks; the one to
//! locker 2 is still on its way (a link that delivers it late, from X)
//! when X goes idle (a current-thread runtime whose `block_on` returned;
//! driven, it would land a second later).
//! The holder then unlocks on a plain thread: `unlock()` returns
//! `LockLost`, but the clean-up is claimed, so it only kicks the retry
//! queues, which are empty; the stalled task neither finishes nor is
//! dropped (X is idle, not gone), and locker 2, answering all along,
//! keeps the entry until it expires.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::executor::block_on;
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, Error, Lease, LockArgs, LockerConfig, NetLocker};

use crate::common::holding;

const SEED: u64 = 36_345;

#[test]
fn a_lost_lock_whose_clean_up_stalled_on_an_idle_runtime_is_freed_once_its_holder_lets_go() {
    let validity = Duration::from_secs(6);
    let cluster = TestCluster::with_config(
        3,
        SEED,
        LockerConfig {
            validity,
            ..LockerConfig::default()
        },
    );
    // Locker 2's first force-unlock is delivered 1 s late, from the
    // caller's runtime: on the wire while that runtime runs (driven, it
    // lands 1 s after it was sent); later calls go through at once.
    let delayed = Arc::new(AtomicBool::new(false));
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let delayed = delayed.clone();
            Arc::new(Relay::new(l, move |kind, _| {
                if i == 2 && kind == CallKind::ForceUnlock && !delayed.swap(true, Ordering::SeqCst)
                {
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
    let acquiring = crate::common::runtime();
    let (guard, seen) = acquiring.block_on(async {
        let guard = crate::common::try_lock_x(&ds).await;
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
        // Past the margin: the clean-up has begun, its force-unlock to
        // locker 2 on its way.
        tokio::time::sleep(Duration::from_millis(2300)).await;
        (guard, seen)
    });
    assert!(guard.is_lost(), "the lane declared the loss");
    let uid = guard.uid().to_owned();
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [false, false, true],
        "locker 2 still holds the entry; the force-unlock to it is on its way"
    );
    // X is kept but no longer driven: idle, not gone.
    let unlocked = block_on(guard.unlock());
    assert!(
        matches!(unlocked, Err(Error::LockLost)),
        "unlock says the lock was lost: {unlocked:?}"
    );
    let start = Instant::now();
    let left = loop {
        let left = holding(cluster.lockers(), &uid);
        if !left.iter().any(|h| *h) || start.elapsed() >= Duration::from_millis(2000) {
            break left;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let at = seen.elapsed();
    eprintln!("{at:?} after the loss, the holder let go; lockers holding the uid {left:?}");
    assert!(
        at < Duration::from_millis(5500),
        "checked before locker 2 could expire the entry: {at:?}"
    );
    assert!(
        !left.iter().any(|h| *h),
        "unlock() returned LockLost and, two seconds later (the stalled force-unlock would \
         have landed after one on a driven runtime), the lost lock's entry is still on locker \
         2, which answers: the clean-up that claimed it stalled on the idle runtime: {left:?}"
    );
    drop(acquiring);
}
