//! Reproduces a past break: an unlock reported `ReleaseUnconfirmed` although every locker had freed the lock: one had only ever refused the connection of its lock call, and the reply of another's applied unlock was late.
//!
//! `WriteGuard::unlock` is `Ok` once a quorum of lockers is known not to
//! hold the lock (`release::release_confirmed`), and a call that "failed
//! before it was sent (no connection could be had)" was never applied
//! (docs/guarantees.md, "No leaks"; `Error::never_sent`): the locker never
//! held the uid, as one that refused it did not. Three lockers reached over
//! a link. Locker 2 refuses every connection (down for a deploy); lockers
//! 0 and 1 grant. At the unlock, locker 0 confirms, locker 1 frees the
//! entry but its reply comes after the unlock's deadline. Lockers 0 and 2
//! are known free (a write quorum), and in fact no locker holds the lock,
//! but the release counts locker 2 only if its unlock is answered, which
//! it cannot be: `ReleaseUnconfirmed { confirmed: 1 }`.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::NetLocker;

const SEED: u64 = 36_344;

#[tokio::test(start_paused = true)]
async fn an_unlock_counts_a_locker_that_refused_every_connection_of_its_lock_as_free() {
    let cluster = TestCluster::new(3, SEED);
    let slow_unlock = Arc::new(AtomicBool::new(false));
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let slow_unlock = slow_unlock.clone();
            Arc::new(Relay::new(l, move |kind, _| match (i, kind) {
                (2, _) => Route::Lost("connection refused (injected fault)".into()),
                (1, CallKind::Unlock) if slow_unlock.load(Ordering::SeqCst) => {
                    Route::SlowReply(Duration::from_secs(30))
                }
                _ => Route::Forward,
            })) as Arc<dyn NetLocker>
        })
        .collect();
    let w = common::seeded(lockers, "w", SEED);
    let guard = tokio::time::timeout(Duration::from_secs(5), w.rw_mutex(["res"]).unwrap().lock())
        .await
        .expect("in time")
        .expect("lockers 0 and 1 grant");
    assert_eq!(cluster.total_entries(), 2, "lockers 0 and 1 hold it");
    slow_unlock.store(true, Ordering::SeqCst);
    let released = tokio::time::timeout(Duration::from_secs(20), guard.unlock())
        .await
        .expect("in time");
    let left = cluster.total_entries();
    eprintln!("unlock gave {released:?}; entries left {left}");
    assert_eq!(left, 0, "every locker freed the lock (or never held it)");
    assert!(
        released.is_ok(),
        "locker 0 confirmed and locker 2 never received a call of this uid (its connection was \
         refused each time): a write quorum is known free, and no locker holds the lock, yet \
         unlock() gave {released:?}"
    );
}
