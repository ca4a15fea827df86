//! Reproduces a past break: a waiter one of whose three lockers stopped honouring the lease (counted as down) gave up its place in line at every turn and retried after a backoff, so a freed lock went to a younger waiter.
//!
//! docs/guarantees.md, "Fair waiting (FIFO)": "Every locker orders its
//! waiters by ticket ... So a freed lock goes to the waiter that waited
//! longest". The fix of round 36 (src/lock/wait_round.rs, `WaitRound`'s
//! `barred`): a locker that fails for good (a lease it cannot honour)
//! "counts as down and is asked again like a failing one"; the wait goes
//! on while the others can make a quorum.
//!
//! The scene: three lockers; "x" holds "res" on all three. "old" waits
//! for it first; its locker 0 then announces a validity (1 s) shorter than
//! the lease (60 s), so `Coordinator::honours_lease` stops every call to it
//! (a locker down; lockers 1 and 2 still make a quorum). "young" waits for
//! it a moment later over the same three lockers (locker 0 as it is). x
//! unlocks after a few seconds: "old" waited longest, and lockers 1 and 2,
//! all it needs, keep its place in line - or should. "young" gets the
//! lock; "old" is still waiting.
//!
//! Suspected cause: src/lock/wait_round.rs `wait_call` answers a locker
//! that does not honour the lease with `Answer::Refused` (through
//! `Acquisition::record_unsent`), so `refused_without_place()` holds and
//! the wait ends with `WaitEnd::Refused` (as for a locker without queues):
//! `DRWMutex::wait_in_line` drops its places on lockers 1 and 2 and sleeps
//! a backoff before it queues again - a locker counted as down is taken
//! for one that cannot queue.
#![cfg(feature = "testing")]

use crate::common::shrinking::first_shrinking;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;

const SEED: u64 = 38_201;
#[tokio::test(start_paused = true)]
async fn an_older_waiter_beside_a_locker_that_stopped_honouring_the_lease_keeps_its_turn() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let x = common::seeded(cluster.net_lockers(), "x", SEED);
    let held = x.rw_mutex(["res"]).unwrap().lock().await.expect("x locks");

    let (lockers, short) = first_shrinking(cluster.net_lockers());
    let old = common::seeded(lockers, "old", SEED + 1);
    let young = common::seeded(cluster.net_lockers(), "young", SEED + 2);
    short.store(true, Ordering::SeqCst);

    let order: Arc<Mutex<Vec<&'static str>>> = Arc::default();
    let spawn = |ds: &quorum_lock::Dsync, who: &'static str| {
        let mutex = ds.rw_mutex(["res"]).unwrap();
        let order = order.clone();
        tokio::spawn(async move {
            let guard = mutex.lock_timeout(Duration::from_secs(30)).await;
            order.lock().unwrap().push(who);
            if let Ok(guard) = guard {
                // Held a moment, so that the other cannot come in between.
                tokio::time::sleep(Duration::from_secs(5)).await;
                let _ = guard.unlock().await;
            }
        })
    };
    let first = spawn(&old, "old");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let second = spawn(&young, "young");
    tokio::time::sleep(Duration::from_secs(3)).await;
    held.unlock().await.expect("x unlocks");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let granted_first = order.lock().unwrap().clone();
    for task in [first, second] {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("both end in time")
            .expect("no panic");
    }
    let all = order.lock().unwrap().clone();
    eprintln!("half a second after x's unlock: {granted_first:?}; in the end: {all:?}");
    assert_eq!(
        granted_first,
        ["old"],
        "\"old\" waited longest and lockers 1 and 2 (a quorum with locker 0 counted as \
         down) had it first in line; the freed lock should have gone to it"
    );
}
