//! Reproduces a past break: a semaphore permit's `loss_token()` taken outside any runtime after the runtime that acquired the permit ended was never cancelled, though another runtime kept the permit's locks and reported their loss.
//!
//! docs/guarantees.md, "Any runtime": "every held lock is refreshed, and
//! its loss reported, as long as any runtime that holds one of the locks
//! is alive and driven, whichever runtime locked first and whether or not
//! that one still exists." `SemaphorePermit::loss_token`
//! (src/semaphore/permit.rs): "A token that is cancelled when the permit
//! is lost." (`WriteGuard::loss_token` may lag a stalled process "until a
//! runtime runs again"; here one runs all along.)
//!
//! What happens instead: outside a runtime the permit spawns its watcher
//! on its home runtime's handle; that runtime has ended, so the watcher is
//! dropped unrun. Another runtime holds the permit's locks (its `lost()`
//! is polled there), its lane declares the loss when two of three lockers
//! no longer hold them, `lost()` fires and `is_lost()` is true, and the
//! token stays uncancelled.
#![cfg(feature = "testing")]

use crate::common;
use std::time::{Duration, Instant};

use futures::executor::block_on;
use quorum_lock::{LockArgs, NetLocker};

const SEED: u64 = 3629;

#[test]
fn a_permit_loss_token_taken_outside_a_runtime_fires_after_its_home_runtime_ended() {
    eprintln!("seed {SEED}");
    let validity = Duration::from_secs(6);
    let (cluster, builder) = common::three_lockers_and_a_lease(
        SEED,
        validity,
        Duration::from_secs(2),
        Duration::from_millis(100),
    );
    let ds = builder.build().expect("valid coordinator");
    let home = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let permit = home.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(5),
            ds.semaphore("pool", 2).unwrap().try_acquire(),
        )
        .await
        .expect("in time")
        .expect("a permit")
    });
    home.shutdown_timeout(Duration::from_secs(1));

    // Another runtime, alive and driven, holds the permit's locks.
    let other = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let lost = other.spawn(permit.lost());
    // Outside any runtime.
    let token = permit.loss_token();
    std::thread::sleep(Duration::from_millis(300));
    assert!(!permit.is_lost(), "the other runtime keeps the permit");
    assert!(!token.is_cancelled(), "not lost yet");

    // Two of three lockers no longer hold any of the permit's locks.
    for locker in &cluster.lockers()[..2] {
        let uids: Vec<_> = block_on(NetLocker::locks(&**locker))
            .expect("a local listing")
            .into_iter()
            .map(|l| l.uid)
            .collect();
        assert!(!uids.is_empty(), "the locker holds the permit's locks");
        for uid in uids {
            let forced = LockArgs {
                uid: uid.as_str().into(),
                resources: Vec::<String>::new().into(),
                owner: "admin".into(),
                source: "test".into(),
                quorum: 1,
            };
            block_on(NetLocker::force_unlock(&**locker, &forced)).expect("a local force-unlock");
        }
    }
    other
        .block_on(async { tokio::time::timeout(Duration::from_secs(3), lost).await })
        .expect("the other runtime reports the loss within a few refreshes")
        .expect("the watch ends");
    assert!(permit.is_lost(), "the permit is lost");
    let reported = Instant::now();
    while !token.is_cancelled() && reported.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "lost() fired and is_lost() is true; {:?} later the loss token is cancelled: {}",
        reported.elapsed(),
        token.is_cancelled()
    );
    assert!(
        token.is_cancelled(),
        "the permit's loss was reported on a live runtime, and its loss token taken outside a \
         runtime was not cancelled within 1 s"
    );
    drop(permit);
    other.shutdown_timeout(Duration::from_secs(1));
}
