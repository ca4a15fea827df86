//! Reproduces a past break: a guard held longer than the validity after its acquire left the grant of a straggler whose runtime shut down after the release: the dropped call's owed unlock counted its retry window from when the call was sent, so it expired from the queue unsent, and the straggler watch, seeing the call settled, sent nothing.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": dropping
//! "a guard never leaves an entry behind on a reachable locker". "Any
//! runtime": "a release watches every locker with a lock or wait call on
//! its way ... until each such call settles (it then undoes its own
//! grant)"; a call dropped in flight "queues its unlock".
//!
//! What happens: three lockers that keep an entry 4 s past its last
//! refresh, a lease of 4 s. w's `try_lock` on runtime A wins with lockers
//! 0 and 1; its call to locker 2 was applied there but its reply is slow,
//! so it is a straggler handed to A, which is then no longer driven. The
//! guard's refresh runs on runtime B, and refreshes keep all three entries
//! alive. 5 s later the guard is dropped on B: lockers 0 and 1 are
//! unlocked and locker 2 is watched (`release::watch_stragglers`). A is
//! shut down right after: the straggler's `release::Owed` is dropped
//! armed and queues locker 2's unlock with `give_up` counted from the
//! call's send (`Owed::began`, 5 s ago, past the 4 s window): the drain
//! task drops it as expired. The call counts as settled, so the watch
//! ends without sending anything. Locker 2 answers every call, yet keeps
//! w's entry until it expires.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common::holding;
use quorum_lock::testing::{CallKind, Route, TestCluster};
use quorum_lock::{Dsync, Lease, LockerConfig};

const SEED: u64 = 36_323;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

#[test]
fn a_guard_held_past_the_validity_frees_the_grant_of_a_straggler_dropped_after_its_release() {
    eprintln!("seed {SEED}");
    let validity = Duration::from_secs(4);
    let cluster = TestCluster::with_config(
        3,
        SEED,
        LockerConfig {
            validity,
            ..LockerConfig::default()
        },
    );
    let links = cluster.relayed_lockers(move |i, kind, _| {
        if i == 2 && kind == CallKind::Lock {
            Route::SlowReply(Duration::from_secs(600))
        } else {
            Route::Forward
        }
    });
    let w = Dsync::builder(links)
        .owner("w")
        .rng_seed(SEED)
        .lease(Lease {
            validity,
            safety_margin: Duration::from_secs(1),
            refresh_interval: Duration::from_millis(200),
        })
        .build()
        .expect("valid coordinator");

    let a = runtime();
    let guard = a.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(5),
            w.rw_mutex(["res"]).unwrap().try_lock(),
        )
        .await
        .expect("in time")
        .expect("lockers 0 and 1 grant")
    });
    let uid = guard.uid().to_string();
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [true, true, true],
        "locker 2 applied the lock; its reply is on its way"
    );

    // A is no longer driven; the guard is kept alive from B.
    let b = runtime();
    b.block_on(async {
        drop(guard.loss_token());
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    assert!(!guard.is_lost(), "a quorum keeps confirming the refreshes");
    let held = holding(cluster.lockers(), &uid);
    assert_eq!(held, [true, true, true], "refreshes keep every entry");

    b.block_on(async { drop(guard) });
    a.shutdown_timeout(Duration::from_secs(1));
    let finished = b.block_on(async {
        let finished = w.finish_releases(Duration::from_secs(3)).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        finished
    });
    let left = holding(cluster.lockers(), &uid);
    eprintln!("finish_releases gave {finished:?}; w's entries {left:?}");
    assert!(
        !left.iter().any(|h| *h),
        "every locker answers, yet after the guard was dropped and its straggler's runtime shut \
         down, lockers {left:?} still hold w's entry (finish_releases: {finished:?})"
    );
}
