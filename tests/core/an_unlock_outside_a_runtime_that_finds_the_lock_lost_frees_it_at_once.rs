//! Reproduces a past break: an `unlock()` polled outside any runtime that found the lock lost handed the force-unlock to the runtime that acquired the lock, which was gone, so the entries stayed on every locker until they expired.
//!
//! docs/guarantees.md, "A lost lock is freed once its holder lets go": the
//! entries of a lost lock are force-unlocked a safety margin after the
//! loss, and "As soon as the holder drops its guard (or `unlock()` returns
//! `Error::LockLost`), they go at once instead." The guard's `unlock()`
//! docs (src/lock/guard.rs): "polled outside one (a plain thread, another
//! executor), it runs on a runtime of its own, so it works even when the
//! runtime that acquired the lock is gone or no longer driven". "Any
//! runtime": "an acquiring runtime that is idle or gone holds nothing up".
//! When the lock is lost by the time `unlock()` looks, it declares the loss
//! on the current runtime or, outside one, on the acquiring runtime's
//! handle; that runtime was shut down, the force-unlock task is dropped
//! unrun, and the three lockers, all answering, keep the entries until
//! they expire.
#![cfg(feature = "testing")]

use crate::common;
use std::time::Duration;

use futures::executor::block_on;
use quorum_lock::Error;

const SEED: u64 = 3664;

/// Lockers and lease with a 6 s validity and a 1 s margin (trusted for
/// 5 s), refreshed every 100 ms. The lock is taken on a runtime that is
/// then shut down, so nothing refreshes it: it is lost 4.9 to 5 s later,
/// and the lockers expire it no sooner than 5.9 s later. At 5.2 s the
/// holder calls `unlock()` on a plain thread, which returns `LockLost`;
/// 100 ms later no locker should hold the uid.
#[test]
fn an_unlock_outside_a_runtime_that_finds_the_lock_lost_frees_it_at_once() {
    eprintln!("seed {SEED}");
    let validity = Duration::from_secs(6);
    let (cluster, builder) = common::three_lockers_and_a_lease(
        SEED,
        validity,
        Duration::from_secs(1),
        Duration::from_millis(100),
    );
    let ds = builder.build().expect("valid coordinator");
    let acquiring = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let guard = acquiring.block_on(async {
        let guard = crate::common::try_lock_x(&ds).await;
        // A few refreshes, so that the last one was sent just now.
        tokio::time::sleep(Duration::from_millis(350)).await;
        guard
    });
    let uid = guard.uid().to_owned();
    acquiring.shutdown_timeout(Duration::from_secs(1));
    let shut = std::time::Instant::now();

    std::thread::sleep(Duration::from_millis(5200));
    assert!(guard.is_lost(), "nothing refreshed the lock for 5.2 s");
    let before = crate::common::holding(cluster.lockers(), &uid);
    assert_eq!(
        before,
        [true, true, true],
        "the lockers still hold the entries before the unlock"
    );
    let unlocked = block_on(guard.unlock());
    assert!(
        matches!(unlocked, Err(Error::LockLost)),
        "unlock says the lock was lost: {unlocked:?}"
    );
    std::thread::sleep(Duration::from_millis(100));
    let left = crate::common::holding(cluster.lockers(), &uid);
    let at = shut.elapsed();
    eprintln!("{at:?} after the acquiring runtime ended, lockers holding the uid: {left:?}");
    assert!(
        at < Duration::from_millis(5900),
        "checked before the lockers could expire the entries: {at:?}"
    );
    assert!(
        !left.iter().any(|h| *h),
        "an unlock outside a runtime returned LockLost and the lost lock's entries stayed on \
         every locker: {left:?}"
    );
}
