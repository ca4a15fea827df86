//! Reproduces a past break: a refresh re-created the entry on a restarted locker whose refusal of the grant was still on its way when the unlock began, and the refusal, arriving after, sent no unlock there.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": an
//! `unlock()` "never leaves an entry behind on a reachable locker", and a
//! locker "that refused the grant but was sent a refresh since" is unlocked
//! like a grant, "also one whose reply was lost or that was still on its
//! way when the release began". Here it is the refusal that is still on
//! its way: the release plan skips a locker whose lock call has not
//! answered (its call is to undo its own grant), the refresh sent to it
//! meanwhile is not looked at, and the refusal that arrives after the
//! release undoes nothing. The entry the refresh re-created stays until it
//! expires, on a locker that answers every call.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, Lease, LockArgs, NetLocker};
use tokio::time::sleep;

const SEED: u64 = 3601;

/// Three lockers, refreshed every 500 ms; node 2 holds a leftover of "x".
/// The lock call to node 2 arrives at once and is refused (the leftover),
/// but the refusal takes 900 ms to come back (within the 1 s acquire
/// timeout); nodes 0 and 1 grant, so `try_lock` wins. Node 2 restarts
/// (forgetting the leftover) and the holder's first refresh re-creates the
/// entry there in its quarantine. The holder unlocks, confirmed by nodes 0
/// and 1, before the refusal comes back. Five seconds later node 2, which
/// answers every call, should hold nothing of the released uid.
#[tokio::test(start_paused = true)]
async fn a_confirmed_unlock_leaves_no_entry_where_a_refresh_reached_a_locker_whose_refusal_was_still_on_its_way(
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let leftover = LockArgs {
        uid: "leftover".into(),
        resources: vec!["x".to_string()].into(),
        owner: "gone".into(),
        source: "test".into(),
        quorum: 2,
    };
    assert!(NetLocker::lock(&*cluster.lockers()[2], &leftover)
        .await
        .unwrap());
    let slowed = Arc::new(AtomicUsize::new(0));
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| match i {
            2 => {
                let slowed = slowed.clone();
                Arc::new(Relay::new(l, move |kind, _| {
                    if kind == CallKind::Lock && slowed.fetch_add(1, Ordering::SeqCst) == 0 {
                        Route::SlowReply(Duration::from_millis(900))
                    } else {
                        Route::Forward
                    }
                })) as Arc<dyn NetLocker>
            }
            _ => l,
        })
        .collect();
    let a = Dsync::builder(lockers)
        .owner("a")
        .rng_seed(SEED)
        .lease(Lease {
            refresh_interval: Duration::from_millis(500),
            ..Lease::default()
        })
        .build()
        .expect("valid coordinator");
    let guard = a
        .rw_mutex(["x"])
        .unwrap()
        .try_lock()
        .await
        .expect("nodes 0 and 1 grant");
    let uid = guard.uid().to_owned();
    assert_eq!(
        slowed.load(Ordering::SeqCst),
        1,
        "the lock call reached node 2"
    );
    assert!(
        !crate::common::holds(&cluster.lockers()[2], &uid),
        "node 2 refused"
    );

    cluster.restart(&[2]).unwrap();
    sleep(Duration::from_millis(650)).await;
    assert!(
        crate::common::holds(&cluster.lockers()[2], &uid),
        "the first refresh re-created the entry on node 2 in its quarantine"
    );
    guard
        .unlock()
        .await
        .expect("nodes 0 and 1 confirm the unlock");
    sleep(Duration::from_secs(5)).await;
    let left: Vec<bool> = crate::common::holding(cluster.lockers(), &uid);
    eprintln!("5 s after the confirmed unlock, nodes holding the uid: {left:?}");
    assert!(
        !left.iter().any(|h| *h),
        "a refresh sent while node 2's refusal was on its way left the released uid's entry \
         there after a confirmed unlock: {left:?}"
    );
}
