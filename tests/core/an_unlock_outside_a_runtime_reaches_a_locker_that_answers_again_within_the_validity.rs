//! Reproduces a past break: an unlock polled outside any runtime queued its failed unlock on the private runtime it ran on, and that runtime ended with the drainer, so a locker that answered again within the validity kept the entry.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": "An unlock
//! that fails goes to its locker's retry queue and is retried with backoff
//! until it lands or until the locker must have expired the entry by
//! itself ... So a locker that answers again within the validity is
//! cleaned up". "Any runtime": releases run "on a private one for
//! `unlock()` outside any runtime, and failed unlocks are drained by a
//! task on each runtime that queued one". The private runtime lingers for
//! the unlock timeout (at most 5 s) after the unlock returns and is then
//! dropped with its drainer: the queued unlock is left with no task to
//! send it, while the acquiring runtime is alive and driven, and the
//! locker that comes back keeps the released entry until it expires.
//!
//! The guard's `unlock()` docs (src/lock/guard.rs) promise that "polled
//! outside one (a plain thread, another executor), it runs on a runtime of
//! its own, so it works even when the runtime that acquired the lock is
//! gone or no longer driven", and that a release too few lockers confirmed
//! "is then retried in the background until the lockers must have expired
//! the entries anyway". Here the acquiring runtime is even alive and
//! driven, and the retry still stops 300 ms after the unlock returned (the
//! same holds for an unconfirmed unlock: its retries go to the same queue).
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Timeouts};

const SEED: u64 = 3602;

/// Three lockers, all granting "x". Node 2 then refuses connections, and
/// the holder unlocks from a plain thread (`block_on`, no runtime):
/// confirmed by nodes 0 and 1, node 2's unlock goes to its retry queue.
/// With an unlock timeout of 300 ms the private runtime is gone 300 ms
/// later. Node 2 answers again 1 s after the unlock, well within the 60 s
/// validity, while the test's runtime (the acquiring one) keeps running;
/// 3 s later node 2 should hold nothing of the released uid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_outside_a_runtime_reaches_a_locker_that_answers_again_within_the_validity() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let ds = Dsync::builder(cluster.net_lockers())
        .owner("a")
        .rng_seed(SEED)
        .timeouts(Timeouts {
            unlock: Duration::from_millis(300),
            ..Timeouts::default()
        })
        .build()
        .expect("valid coordinator");
    let guard = crate::common::try_lock_x(&ds).await;
    let uid = guard.uid().to_owned();
    assert!(
        crate::common::holds(&cluster.lockers()[2], &uid),
        "node 2 granted"
    );

    cluster.set_refuse(true, &[2]).unwrap();
    let unlocked = crate::common::unlock_on_a_plain_thread(guard).await;
    unlocked.expect("nodes 0 and 1 confirm the unlock");

    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.heal(&[2]).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let left = [
        crate::common::holds(&cluster.lockers()[0], &uid),
        crate::common::holds(&cluster.lockers()[1], &uid),
        crate::common::holds(&cluster.lockers()[2], &uid),
    ];
    eprintln!("3 s after node 2 answered again, nodes holding the uid: {left:?}");
    assert!(
        !left.iter().any(|h| *h),
        "an unlock made outside a runtime left the released uid's entry on a locker that \
         answered again within the validity: {left:?}"
    );
}

/// As above, with nodes 1 and 2 refusing connections: the unlock made
/// outside a runtime returns `ReleaseUnconfirmed`, which says the release
/// "is then retried in the background until the lockers must have expired
/// the entries anyway". Both nodes answer again 1 s later; 3 s after that
/// neither should hold the released uid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconfirmed_unlock_outside_a_runtime_is_retried_until_the_lockers_answer_again() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let ds = Dsync::builder(cluster.net_lockers())
        .owner("a")
        .rng_seed(SEED)
        .timeouts(Timeouts {
            unlock: Duration::from_millis(300),
            ..Timeouts::default()
        })
        .build()
        .expect("valid coordinator");
    let guard = crate::common::try_lock_x(&ds).await;
    let uid = guard.uid().to_owned();

    cluster.set_refuse(true, &[1, 2]).unwrap();
    let unlocked = crate::common::unlock_on_a_plain_thread(guard).await;
    assert!(
        matches!(unlocked, Err(quorum_lock::Error::ReleaseUnconfirmed { .. })),
        "only node 0 confirms: {unlocked:?}"
    );

    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.heal(&[1, 2]).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let left = [
        crate::common::holds(&cluster.lockers()[0], &uid),
        crate::common::holds(&cluster.lockers()[1], &uid),
        crate::common::holds(&cluster.lockers()[2], &uid),
    ];
    eprintln!("3 s after nodes 1 and 2 answered again, nodes holding the uid: {left:?}");
    assert!(
        !left.iter().any(|h| *h),
        "an unconfirmed unlock made outside a runtime was not retried on lockers that answered \
         again within the validity: {left:?}"
    );
}
