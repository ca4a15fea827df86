//! Reproduces a past break: a `lock_timeout` that could not win because too few lockers it may count on answered gave up with `Error::Timeout` (held elsewhere), counting toward its reason the grant of a locker that no longer honours the lease, a grant the wait itself does not count on.
//!
//! docs/guarantees.md, "Why a wait waits": `Error::QuorumUnavailable`,
//! "naming each locker that did not answer and why, when too few lockers
//! answer", `Error::Timeout` only when the lock is held elsewhere ("a
//! quorum answered ... and some have it taken by another owner, or another
//! owner has it on more lockers than a grant can do without"); and "A
//! server that announces a shorter validity later ... is not counted on".
//! The rustdoc of `DRWMutex::lock_timeout` says the same.
//!
//! The scene: five lockers (quorum 3); "y" holds "res" on lockers 1 to 4,
//! so w's `lock_timeout` waits in line there while locker 0 grants at
//! once. Then locker 0 announces a validity (1 s) shorter than the lease
//! (60 s), lockers 3 and 4 refuse every connection, and y frees locker 1,
//! which grants w. What w may count on: locker 1's grant, y's hold on
//! locker 2, lockers 0, 3 and 4 down. Had 3 and 4 answered they would
//! have granted (y's hold on one locker is one a grant can do without):
//! too few answer. The wait gives up with `Timeout`.
//!
//! Suspected cause: src/lock/wait_status.rs `WaitStatus::of` counts every
//! `Answer::Granted` (locker 0's, kept by `Acquisition::record_unsent` for
//! the release), where `Acquisition::try_win` (src/lock/acquisition.rs)
//! skips a locker that fails `Coordinator::lease_honoured`: granted 2 +
//! held 1 make a "quorum answered, some held elsewhere".
#![cfg(feature = "testing")]

use crate::common::shrinking::first_shrinking;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::{self, args};
use quorum_lock::testing::TestCluster;
use quorum_lock::Error;

const SEED: u64 = 40_301;

#[tokio::test(start_paused = true)]
async fn lock_timeout_does_not_count_the_grant_of_a_locker_not_honouring_the_lease_toward_its_reason(
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(5, SEED);
    let y = args("y", &["res"]);
    let plain = cluster.net_lockers();
    for locker in &plain[1..] {
        assert!(locker.lock(&y).await.expect("answers"), "y holds res");
    }
    let (lockers, short) = first_shrinking(plain.clone());
    let w = common::seeded(lockers, "w", SEED + 1);
    let mutex = w.rw_mutex(["res"]).unwrap();
    let watcher = mutex.clone();
    let wait =
        tokio::spawn(async move { mutex.lock_timeout(Duration::from_secs(6)).await.map(drop) });
    tokio::time::sleep(Duration::from_millis(300)).await;

    short.store(true, Ordering::SeqCst);
    cluster.set_refuse(true, &[3, 4]).unwrap();
    assert!(
        plain[1].unlock(&y).await.expect("answers"),
        "y frees locker 1"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = watcher.waiting();
    eprintln!("waiting(): {status:?}");

    let ended = tokio::time::timeout(Duration::from_secs(20), wait)
        .await
        .expect("the wait ends in time")
        .expect("no panic");
    eprintln!("lock_timeout ended with {ended:?}");
    assert!(
        matches!(ended, Err(Error::QuorumUnavailable { .. })),
        "of the lockers w may count on only locker 1 granted and locker 2 is held; lockers 0, \
         3 and 4 are down and 3 and 4 would grant: too few answer, yet it ended with {ended:?}"
    );
}
