//! Reproduces a past break: a wait whose re-check of a granting locker was refused before it was sent (the locker now announces a validity shorter than the lease) took that locker for one that never held the lock, and its failure left the grant there.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": a failed
//! `lock()` "never leaves an entry behind on a reachable locker"; every
//! locker that granted, or may hold the grant, is unlocked.
//!
//! What happens: three lockers; "y" holds "res" on lockers 1 and 2, so
//! w's `lock()` waits in line there while locker 0 grants at once. Locker
//! 0 then announces a validity (1 s) shorter than the lease's (60 s).
//! When the wait re-checks locker 0, `Coordinator::honours_lease` refuses
//! to send the call and `wait_round::wait_call` records `Answer::Refused`
//! over the grant; the wait fails (then with `Error::InvalidArgument`,
//! since with its deadline, the other two lockers going on) and its
//! release (`Acquisition::begin_release`) counts locker 0 as "never held
//! this uid". Locker 0 answers every call, yet keeps w's entry: nothing
//! ever sends it the unlock.
#![cfg(feature = "testing")]

use crate::common::shrinking::first_shrinking;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::{self, args, leftovers};
use quorum_lock::testing::TestCluster;

const SEED: u64 = 36_321;

#[tokio::test(start_paused = true)]
async fn a_failed_wait_frees_the_grant_of_a_locker_that_stopped_honouring_the_lease() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let y = args("y", &["res"]);
    for locker in &cluster.net_lockers()[1..] {
        assert!(locker.lock(&y).await.expect("answers"), "y holds res");
    }
    let (lockers, short) = first_shrinking(cluster.net_lockers());
    let w = common::seeded(lockers, "w", SEED);
    let mutex = w.rw_mutex(["res"]).unwrap();
    // A locker that no longer honours the lease counts as down: the wait
    // goes on with the other two, until its deadline.
    let wait =
        tokio::spawn(async move { mutex.lock_timeout(Duration::from_secs(3)).await.map(drop) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let of_w = || -> Vec<usize> {
        leftovers(cluster.lockers())
            .into_iter()
            .filter(|(_, e)| e.owner == "w")
            .map(|(i, _)| i)
            .collect()
    };
    assert_eq!(
        of_w(),
        [0],
        "locker 0 granted w; lockers 1 and 2 keep its place"
    );

    short.store(true, Ordering::SeqCst);
    let ended = tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("the wait ends in time")
        .expect("no panic");
    eprintln!("the wait ended with {ended:?}");
    assert!(ended.is_err(), "the wait cannot go on: {ended:?}");
    let finished = w.finish_releases(Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let left = of_w();
    eprintln!("finish_releases gave {finished:?}; w's entries left on lockers {left:?}");
    assert!(
        left.is_empty(),
        "every locker answers, yet after the failed wait's release locker(s) {left:?} keep w's \
         grant (locker 0's re-check was refused unsent and recorded as a refusal)"
    );
}
