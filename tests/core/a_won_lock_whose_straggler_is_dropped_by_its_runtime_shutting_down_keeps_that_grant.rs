//! Reproduces a past break: a lock won while one locker's grant was still on its way, whose acquiring runtime then shut down, had that grant unlocked by the straggler's owed unlock, so the held lock no longer survived a minority of lockers going down.
//!
//! docs/guarantees.md, "Progress with a minority down": "A lock is granted
//! while a minority of lockers fail, hang or refuse"; "Held locks stay
//! alive, lost locks are reported": "Every held lock is refreshed on every
//! locker"; "Any runtime": "every held lock is refreshed, and its loss
//! reported, as long as any runtime that holds one of the locks is alive
//! and driven, whichever runtime locked first and whether or not that one
//! still exists". A straggler's grant that arrives after the win is part
//! of the lock (src/lock/round.rs records it; tests/core/faults.rs
//! `late_grants_after_a_won_round_are_kept_until_unlock` holds it to that).
//!
//! What happens instead: three lockers; locker 2 applies the lock at once
//! but its reply takes 3 s. `try_lock` on runtime A wins with lockers 0
//! and 1; the call to locker 2 is a straggler on A. The guard lives on
//! (runtime B uses `lost()`, so its refresh runs there) and A is shut down:
//! the straggler is dropped armed with its `release::Owed`
//! (src/lock/round.rs `lock_call`), which queues and sends an unlock of the
//! held lock's uid to locker 2. The lock now stands on lockers 0 and 1
//! only; locker 0 going down (a minority) loses it, although lockers 1 and
//! 2 answer every call.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{self, holding};
use quorum_lock::testing::{CallKind, Route, TestCluster};
use quorum_lock::{Dsync, Lease};

const SEED: u64 = 36_296;

#[test]
fn a_won_lock_whose_straggler_is_dropped_by_its_runtime_shutting_down_keeps_that_grant() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let down = Arc::new(AtomicBool::new(false));
    let lockers = {
        let down = down.clone();
        cluster.relayed_lockers(move |i, kind, _| {
            if i == 0 && down.load(Ordering::SeqCst) {
                Route::Lost("locker 0 is down".into())
            } else if i == 2 && kind == CallKind::Lock {
                Route::SlowReply(Duration::from_secs(3))
            } else {
                Route::Forward
            }
        })
    };
    let ds = Dsync::builder(lockers)
        .owner("a")
        .rng_seed(SEED)
        .lease(Lease {
            validity: Duration::from_secs(6),
            safety_margin: Duration::from_secs(2),
            refresh_interval: Duration::from_millis(200),
        })
        .build()
        .expect("valid coordinator");
    let a = common::runtime();
    let guard = a.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(2),
            ds.rw_mutex(["x"]).unwrap().try_lock(),
        )
        .await
        .expect("in time")
        .expect("lockers 0 and 1 grant")
    });
    let uid = guard.uid().to_owned();
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [true, true, true],
        "locker 2 applied the lock; its reply is on its way"
    );
    let b = common::runtime();
    b.block_on(async {
        // Its loss token makes B refresh it (a `lost()` future would have
        // to be polled there to do so).
        drop(guard.loss_token());
        tokio::time::sleep(Duration::from_millis(10)).await;
    });
    a.shutdown_timeout(Duration::from_secs(1));
    let shut = Instant::now();
    b.block_on(async { tokio::time::sleep(Duration::from_millis(300)).await });
    let after_shutdown = holding(cluster.lockers(), &uid);
    // A minority goes down; lockers 1 and 2 answer every call.
    down.store(true, Ordering::SeqCst);
    let lost = b.block_on(async {
        tokio::time::timeout(Duration::from_secs(6), guard.lost())
            .await
            .is_ok()
    });
    let at = shut.elapsed();
    eprintln!(
        "after A shut down: entries {after_shutdown:?}; {at:?} later, with locker 0 down, lost {lost}"
    );
    assert!(
        !lost,
        "the lock was held on all three lockers and only locker 0 went down, yet it was lost \
         {at:?} after its acquiring runtime shut down (entries after the shutdown: \
         {after_shutdown:?})"
    );
    drop(guard);
}
