//! Reproduces a past break: with `Timeouts::release_retry` zero, `finish_releases` counts as pending at its bound a failed unlock that is left to expiry and will never be sent again.
//!
//! `Timeouts::release_retry` (rustdoc): "Zero turns the background retries
//! off and leaves failed releases to expiry: ... one whose try failed,
//! even before anything reached the locker (its connection refused), is
//! not tried again." `Error::ReleasesPending`: `pending` is "Releases
//! still running". docs/guarantees.md, "Any runtime": at the bound "only
//! those still on their way are pending".
//!
//! The scene, on tokio's paused clock: three lockers, retries off. Guard
//! "a" is dropped; locker 0 refuses its unlock (connection refused), so
//! that release is over: it goes to locker 0's queue only to be dropped
//! there, unsent, by the drain task's next look (10 ms on). A
//! `finish_releases(5 ms)` call then reports one release pending, though
//! nothing is running nor will be sent.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::hooked::{Call, Hooked};
use crate::common::{self};
use quorum_lock::{Error, NetLocker, Timeouts};

const SEED: u64 = 7772;

#[tokio::test(start_paused = true)]
async fn finish_releases_counts_no_failed_unlock_left_to_expiry_with_background_retries_off() {
    eprintln!("seed {SEED}");
    let nodes = common::nodes(3);
    let refused = Arc::new(AtomicBool::new(false));
    let mut lockers: Vec<Arc<dyn NetLocker>> = common::as_lockers(&nodes);
    {
        let refused = refused.clone();
        lockers[0] = Hooked::new(nodes[0].clone())
            .refusing(move |call, _| {
                (call == Call::Unlock && refused.load(Ordering::SeqCst)).then(|| {
                    Error::LockerUnavailable {
                        endpoint: "node-0".into(),
                        reason: "connection refused".into(),
                    }
                })
            })
            .shared();
    }
    let ds = common::with_timeouts(
        lockers,
        SEED,
        Timeouts {
            release_retry: Duration::ZERO,
            ..Timeouts::default()
        },
    );
    let a = common::try_lock(&ds, "a").await;
    let uid = a.uid().to_owned();
    refused.store(true, Ordering::SeqCst);
    drop(a);
    // The release task runs: lockers 1 and 2 free "a", locker 0 refuses.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let after_release = common::holding(&nodes, &uid);
    let finished = ds.finish_releases(Duration::from_millis(5)).await;
    // The drain task's look drops the unlock, unsent.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let later = ds.finish_releases(Duration::ZERO).await;
    eprintln!(
        "holding a after the release {after_release:?}; finish_releases(5 ms): {finished:?}; \
         a later finish_releases(0): {later:?}; holding a then {:?}",
        common::holding(&nodes, &uid)
    );
    assert_eq!(
        after_release,
        [true, false, false],
        "control: locker 0 refused the unlock, lockers 1 and 2 took it"
    );
    assert!(
        later.is_ok(),
        "control: the failed unlock was dropped unsent, left to expiry: {later:?}"
    );
    assert!(
        matches!(
            finished,
            Ok(()) | Err(Error::ReleasesPending { pending: 0, .. })
        ),
        "with retries off the failed unlock is left to expiry (never sent again), yet \
         finish_releases(5 ms) returned {finished:?}"
    );
}
