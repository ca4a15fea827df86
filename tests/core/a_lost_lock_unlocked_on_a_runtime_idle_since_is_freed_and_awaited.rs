//! Reproduces a past break: a lock found lost by its own `unlock()` on a runtime that was not driven afterwards kept its entries after `unlock()` returned `LockLost`, and `finish_releases` said every release was done.
//!
//! docs/guarantees.md, "A lost lock is freed once its holder lets go": "As
//! soon as the holder drops its guard (or `unlock()` returns
//! `Error::LockLost`), they go at once instead", and
//! "`Dsync::finish_releases(bound)` waits for these releases, and every
//! other one handed to the background, before a process exits". "Any
//! runtime": "an acquiring runtime that is idle or gone holds nothing up".
//! `Dsync::finish_releases` (src/lock/dsync.rs) fails with
//! `ReleasesPending` when some still run.
//!
//! What happens instead: "x" is taken on runtime A, which is then not
//! driven, so no lane refreshes it; its holder's deadline (validity −
//! margin, 3 s) passes. The holder calls `unlock()` on runtime R: the lock
//! is lost and no lane declared it, so `unlock()` declares it there
//! (`declare_lost`), spawning the clean-up on R, and returns `LockLost`
//! at once. R is not driven again (its `block_on` has returned). The
//! clean-up task, which found the holder gone before it ever ran, is
//! counted among outstanding releases only once it claims the clean-up
//! (src/lock/refresh.rs), and nothing else will claim it: the holder has
//! let go already. `finish_releases` on a third runtime returns `Ok` at
//! once, and every locker, answering all along, keeps the entry.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use crate::common;
use futures::executor::block_on;
use quorum_lock::testing::TestCluster;
use quorum_lock::{Error, NetLocker};

const SEED: u64 = 36_295;

async fn holding(cluster: &TestCluster, uid: &str) -> Vec<bool> {
    let mut left = Vec::new();
    for locker in cluster.lockers() {
        let held = NetLocker::locks(&**locker)
            .await
            .expect("a local listing")
            .iter()
            .any(|l| l.uid == uid);
        left.push(held);
    }
    left
}

#[test]
fn a_lost_lock_unlocked_on_a_runtime_idle_since_is_freed_and_awaited() {
    eprintln!("seed {SEED}");
    let validity = Duration::from_secs(6);
    let (cluster, builder) = common::three_lockers_and_a_lease(
        SEED,
        validity,
        Duration::from_secs(3),
        Duration::from_millis(500),
    );
    let ds = builder.build().expect("valid coordinator");
    let a = common::runtime();
    let taken = Instant::now();
    let guard = a.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(2),
            ds.rw_mutex(["x"]).unwrap().try_lock(),
        )
        .await
        .expect("in time")
        .expect("all three grant")
    });
    let uid = guard.uid().to_owned();
    // A is not driven: nothing refreshes the lock. Past the holder's
    // deadline (3 s), well before the lockers' expiry (6 s).
    std::thread::sleep(Duration::from_millis(3300));
    let r = common::runtime();
    let unlocked = r.block_on(guard.unlock());
    assert!(
        matches!(unlocked, Err(Error::LockLost)),
        "the holder's deadline passed: {unlocked:?}"
    );
    let finishing = common::runtime();
    let finished = finishing.block_on(ds.finish_releases(Duration::from_millis(1500)));
    let mut left = block_on(holding(&cluster, &uid));
    while left.iter().any(|h| *h) && taken.elapsed() < Duration::from_millis(5300) {
        std::thread::sleep(Duration::from_millis(20));
        left = block_on(holding(&cluster, &uid));
    }
    let at = taken.elapsed();
    eprintln!("{at:?} after the lock was taken: finish_releases {finished:?}, lockers holding the uid {left:?}");
    assert!(
        at < Duration::from_millis(5600),
        "checked before the lockers could expire the entry (6 s): {at:?}"
    );
    assert!(
        !left.iter().any(|h| *h) || finished.is_err(),
        "unlock() returned LockLost and, {at:?} after the lock was taken, lockers that answer \
         still hold its entry ({left:?}) while finish_releases said {finished:?}"
    );
    assert!(
        !left.iter().any(|h| *h),
        "unlock() returned LockLost and, {at:?} after the lock was taken, lockers that answer \
         still hold its entry: {left:?}"
    );
    drop((a, r));
}
