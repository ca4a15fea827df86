//! Reproduces a past break: a wait counted the grant of a locker that had since restarted announcing a validity shorter than the lease, and `lock()` returned a guard that one locker of three held.
//!
//! docs/guarantees.md: "A server that announces a shorter validity later
//! (it was offline at build time, or restarted with another one) is not
//! counted on: its grants are refused with that message and its refresh
//! confirmations do not count." docs/safety.md says the same.
//!
//! The scene: three lockers; "x" holds "res" on lockers 1 and 2, so w's
//! `lock()` waits in line there while locker 0 grants at once. Locker 0
//! then restarts (its table wiped, w's grant gone) and announces a
//! validity (1 s) shorter than the lease (60 s). w's re-checks of locker
//! 0 are refused before they are sent (as they should be) and the wait
//! goes on with lockers 1 and 2 (round 36's fix). x then frees locker 1,
//! which grants w. Lockers 1 and 2 are all w may count on, and only one
//! of them granted, yet `lock()` returns: only locker 1 holds w's entry.
//!
//! Suspected cause: src/lock/wait_round.rs `wait_call` refuses the call
//! unsent but, by `Acquisition::record_unsent` (src/lock/acquisition.rs),
//! leaves locker 0's earlier grant recorded "for the release"; the wait,
//! which no longer ends on that locker's permanent error
//! (`barred`, left >= quorum), then wins in `Acquisition::try_win` on
//! that grant plus locker 1's.
#![cfg(feature = "testing")]

use crate::common::shrinking::first_shrinking;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::{self, args, leftovers};
use quorum_lock::testing::TestCluster;

const SEED: u64 = 38_301;
#[tokio::test(start_paused = true)]
async fn a_wait_does_not_count_the_grant_of_a_locker_that_restarted_with_a_shorter_validity() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let x = args("x", &["res"]);
    for locker in &cluster.net_lockers()[1..] {
        assert!(locker.lock(&x).await.expect("answers"), "x holds res");
    }
    let (lockers, short) = first_shrinking(cluster.net_lockers());
    let w = common::seeded(lockers, "w", SEED);
    let mutex = w.rw_mutex(["res"]).unwrap();
    let wait = tokio::spawn(async move { mutex.lock_timeout(Duration::from_secs(10)).await });
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

    // Locker 0 restarts with a validity shorter than the lease.
    cluster.restart(&[0]).expect("restarts");
    short.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!wait.is_finished(), "the wait goes on with lockers 1 and 2");

    // x frees locker 1, which grants w; x still holds locker 2.
    assert!(cluster.net_lockers()[1].unlock(&x).await.expect("answers"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let returned = wait.is_finished();
    let held_on = of_w();
    eprintln!("lock() returned: {returned}; w's entries on lockers {held_on:?}");
    let guard = if returned {
        Some(wait.await.expect("no panic"))
    } else {
        wait.abort();
        None
    };
    if let Some(Ok(guard)) = &guard {
        eprintln!("the guard says lost: {}", guard.is_lost());
    }
    assert!(
        !returned || held_on.len() >= 2,
        "lock() returned {:?} while only locker(s) {held_on:?} hold w's entry: the grant \
         of locker 0, which restarted and announces a validity shorter than the lease, \
         was counted toward the quorum",
        guard.as_ref().map(|g| g.as_ref().map(|_| "a guard"))
    );
}
