//! Reproduces a past break: a wait's call parked on a runtime no longer driven, whose place was granted by a push after the lock's release, kept its entry until it expired: the straggler watch took the pushed grant for an answer and sent no unlock.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": dropping
//! "a guard never leaves an entry behind on a reachable locker". "Any
//! runtime": "A call still in flight on a runtime that is no longer driven
//! neither finishes nor is dropped: when its lock is released, a locker
//! whose call has not answered by the time it must have ended
//! (`Timeouts::acquire`, plus 100 ms) is sent the unlock by the release's
//! side".
//!
//! What happens instead: three lockers; "y" holds "res" on locker 2 only.
//! w's `lock()` on runtime A is granted at once by lockers 0 and 1 and
//! wins; its waiting call to locker 2 is applied there (w's place is queued
//! behind y) but its reply is slow, so it is a straggler handed to A, which
//! is then no longer driven. The guard is dropped on a plain thread: the
//! release unlocks lockers 0 and 1, and lists locker 2 for
//! `release::watch_stragglers`. y then lets go on locker 2, which grants
//! w's place and pushes the grant: `Acquisition::push` records it as
//! locker 2's answer, so when the watch looks (1.1 s later) the call no
//! longer counts as in flight (`Acquisition::in_flight` reads the answer),
//! and no unlock is sent. The call itself waits on A. Locker 2, which
//! answers every call, keeps w's entry until it expires (60 s).
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use crate::common::{self, args, holding};
use quorum_lock::testing::{CallKind, Route, TestCluster};
use quorum_lock::Dsync;

const SEED: u64 = 36_311;

#[test]
fn a_released_lock_frees_a_place_granted_by_push_while_its_call_waits_on_an_idle_runtime() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let lockers = cluster.relayed_lockers(move |i, kind, a| {
        if i == 2 && kind == CallKind::Lock && &*a.owner == "w" {
            Route::SlowReply(Duration::from_secs(30))
        } else {
            Route::Forward
        }
    });
    let w = Dsync::builder(lockers)
        .owner("w")
        .rng_seed(SEED)
        .build()
        .expect("valid coordinator");
    let main = common::runtime();
    let y = args("y", &["res"]);
    let locker2 = cluster.net_lockers()[2].clone();
    assert!(
        main.block_on(locker2.lock(&y)).expect("locker 2 answers"),
        "y holds res on locker 2"
    );

    let a = common::runtime();
    let guard = a.block_on(async {
        tokio::time::timeout(Duration::from_secs(5), w.rw_mutex(["res"]).unwrap().lock())
            .await
            .expect("in time")
            .expect("lockers 0 and 1 grant")
    });
    let uid = guard.uid().to_owned();
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [true, true, false],
        "w holds lockers 0 and 1; its place on locker 2 waits behind y"
    );
    // A is alive but no longer driven. The guard goes on this plain thread.
    drop(guard);
    let dropped = Instant::now();
    std::thread::sleep(Duration::from_millis(100));
    // y lets go on locker 2, which grants w's place and pushes it.
    assert!(
        main.block_on(locker2.unlock(&y)).expect("locker 2 answers"),
        "y's entry goes"
    );
    let granted = holding(cluster.lockers(), &uid);
    let mut left = granted.clone();
    while dropped.elapsed() < Duration::from_secs(4) {
        std::thread::sleep(Duration::from_millis(20));
        left = holding(cluster.lockers(), &uid);
    }
    eprintln!(
        "after y let go w's entries were {granted:?}; {:?} after the guard was dropped: {left:?}",
        dropped.elapsed()
    );
    assert!(
        !left.iter().any(|h| *h),
        "every locker answers, yet {:?} after w's guard was dropped (the straggler watch is due \
         after 1.1 s) locker 2 holds w's entry, granted from the place its parked call left: \
         {left:?}",
        dropped.elapsed()
    );
    drop(a);
}
