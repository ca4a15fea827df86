//! Reproduces a past break: a permit whose first fencing draw was cancelled, or failed on its slot, after its count was confirmed handed out its slot's token on the next call, after the count was forced open and a process of another count was admitted.
//!
//! `SemaphorePermit::fencing_token`: "The first call of each permit also
//! asks a quorum of lockers afresh whether they still hold the count ...,
//! so a count forced open before its next refresh fails it with `LockLost`
//! too", and it is "Cancel safe, as `WriteGuard::fencing_token`" (whose
//! cancelled first draw keeps nothing: the next call draws afresh).
//! docs/semaphore.md: "Each permit's first `fencing_token()` asks a quorum
//! afresh whether the count is still held, so a count forced open since
//! its last refresh gives it no token". The count's confirmation was kept
//! in the permit as soon as it was answered, even when the call it belonged
//! to handed out nothing (cancelled before the slot's draw ended, or failed
//! on it); the next call, the first to hand out a token, asked nobody about
//! the count.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, Error, NetLocker};

/// The names of the count's read lock for `k = 2` (binary 10, in ten
/// digits).
fn count_names(name: &str) -> Vec<String> {
    (0..10)
        .map(|bit| format!("semaphore/{name}/count-bit/{bit}/{}", (2usize >> bit) & 1))
        .collect()
}

/// How the permit's first draw ends without handing out a token.
#[derive(Clone, Copy, Debug)]
enum FirstDraw {
    /// The slot's draw is held up on the way back and the call is
    /// cancelled at 500 ms.
    Cancelled,
    /// The slot's draw reaches no locker: the call fails.
    FailedOnItsSlot,
}

/// One permit (k = 2). Its first `fencing_token()` ends as `first` while
/// the count's check is answered. An administrator then forces the count
/// open and a process with k = 3 is admitted. The permit's next
/// `fencing_token()` must fail with `LockLost`.
async fn scene(seed: u64, first: FirstDraw) {
    eprintln!("seed {seed}, first draw {first:?}");
    let cluster = TestCluster::new(3, seed);
    let held_up = Arc::new(AtomicBool::new(false));
    let relayed: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .map(|inner| {
            let held_up = held_up.clone();
            Arc::new(Relay::new(inner, move |kind, args| {
                let slot = args.resources.iter().any(|r| r.contains("/permit/"));
                if kind == CallKind::Fence && slot && held_up.load(Ordering::SeqCst) {
                    match first {
                        FirstDraw::Cancelled => Route::SlowReply(Duration::from_secs(3)),
                        FirstDraw::FailedOnItsSlot => {
                            Route::Lost("cut off for the slot's draw".into())
                        }
                    }
                } else {
                    Route::Forward
                }
            })) as Arc<dyn NetLocker>
        })
        .collect();
    let a = Dsync::builder(relayed)
        .owner("a")
        .rng_seed(seed)
        .build()
        .expect("valid coordinator");
    let b = Dsync::builder(cluster.net_lockers())
        .owner("b")
        .rng_seed(seed + 1)
        .build()
        .expect("valid coordinator");

    let permit = tokio::time::timeout(
        Duration::from_secs(5),
        a.semaphore("jobs", 2).unwrap().acquire(),
    )
    .await
    .expect("in time")
    .expect("a free permit");
    eprintln!("slots {:?}", permit.slots());

    held_up.store(true, Ordering::SeqCst);
    match first {
        FirstDraw::Cancelled => {
            let cancelled =
                tokio::time::timeout(Duration::from_millis(500), permit.fencing_token()).await;
            assert!(
                cancelled.is_err(),
                "the slot's draw is held up for 3 s: {cancelled:?}"
            );
        }
        FirstDraw::FailedOnItsSlot => {
            let failed = tokio::time::timeout(Duration::from_secs(10), permit.fencing_token())
                .await
                .expect("in time");
            eprintln!("first draw: {failed:?}");
            assert!(
                failed.is_err() && failed != Err(Error::LockLost),
                "the slot's draw reaches no locker: {failed:?}"
            );
        }
    }
    held_up.store(false, Ordering::SeqCst);

    assert_eq!(a.force_unlock(count_names("jobs")).await.unwrap(), 3);
    let other = tokio::time::timeout(
        Duration::from_secs(5),
        b.semaphore("jobs", 3).unwrap().acquire(),
    )
    .await
    .expect("the other count is admitted")
    .unwrap();
    eprintln!("a process with k = 3 holds slots {:?}", other.slots());

    let token = tokio::time::timeout(Duration::from_secs(5), permit.fencing_token())
        .await
        .expect("in time");
    eprintln!(
        "the k = 2 permit: is_lost {}, fencing_token {token:?}",
        permit.is_lost()
    );
    assert_eq!(
        token,
        Err(Error::LockLost),
        "the count of the k = 2 permit was forced open and a k = 3 process holds the \
         semaphore, yet the permit's first token handed out comes with no fresh ask of the \
         count: its first call ({first:?}) kept the count's confirmation"
    );
    drop(other);
}

#[tokio::test(start_paused = true)]
async fn a_permit_whose_first_draw_was_cancelled_draws_no_fencing_token_after_its_count_was_forced_open(
) {
    scene(4202, FirstDraw::Cancelled).await;
}

#[tokio::test(start_paused = true)]
async fn a_permit_whose_first_draw_failed_on_its_slot_draws_no_fencing_token_after_its_count_was_forced_open(
) {
    scene(4203, FirstDraw::FailedOnItsSlot).await;
}
