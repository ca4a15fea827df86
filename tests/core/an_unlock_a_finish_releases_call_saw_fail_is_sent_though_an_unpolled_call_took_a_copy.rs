//! Reproduces a past break: an unlock a `finish_releases` call took back and saw fail is never sent again, because a second call, never polled again, took a copy of it on its way; no drain task is started for it, and the entry stays.
//!
//! docs/guarantees.md, "Any runtime": `finish_releases` takes a release's
//! unlocks back and sends them itself; "what it took back and did not see
//! land (it failed, the call reached its bound, or the call was dropped)
//! goes back to the queue with a drain task to send it"; "No leaks from
//! cancellation or failure": "An unlock that fails goes to its locker's
//! retry queue and is retried with backoff until it lands or until the
//! locker must have expired the entry by itself".
//!
//! The scene, on tokio's paused clock: guard "a" is dropped on runtime
//! `r1`, which is not driven again, so its release is a batch on its way.
//! Locker 0 takes unlocks 1 s late, and refuses them (connection refused,
//! retryable) while `down` is set. Call A, `finish_releases(3 s)`, is
//! polled once: it takes the batch back and sends it. Call B,
//! `finish_releases(30 s)`, is polled once: it takes copies of A's batch
//! and sends them, then is not polled again (its caller stopped driving
//! it; it is not dropped). A is driven: at 1 s its unlock to locker 0 is
//! refused; since B took a copy, A queues nothing and starts no drain
//! task, waits for B's copy and gives up at its bound. Locker 0 then comes
//! back, and the runtime is driven for 20 s more (B's copy is overdue
//! after 10.1 s), yet nothing ever sends locker 0 the unlock: it still
//! holds "a".
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::hooked::Late;
use crate::common::release_on_its_way::{poll_once, ReleaseOnItsWay};
use crate::common::{self};
use quorum_lock::Error;

const SEED: u64 = 7511;

#[test]
fn an_unlock_a_finish_releases_call_saw_fail_is_sent_though_an_unpolled_call_took_a_copy() {
    let down = Arc::new(AtomicBool::new(false));
    let refused = down.clone();
    let scene = ReleaseOnItsWay::new(SEED, |locker, slow| {
        locker
            .unlocks_late_while(slow, Late::Arriving, Duration::from_secs(1))
            .unlocks_refused_while(refused)
    });
    down.store(true, Ordering::SeqCst);

    let paused = common::paused_runtime();
    let (first_a, first_b, finished, at_bound, later) = paused.block_on(async {
        let mut call_a = Box::pin(scene.ds.finish_releases(Duration::from_secs(3)));
        let mut call_b = Box::pin(scene.ds.finish_releases(Duration::from_secs(30)));
        let first_a = poll_once(&mut call_a).await;
        let first_b = poll_once(&mut call_b).await;
        // B is not polled again (nor dropped); A is driven to its end.
        let finished = call_a.await;
        let at_bound = scene.holding();
        // Locker 0 is back; the runtime goes on being driven, past the time
        // B's copy is overdue.
        down.store(false, Ordering::SeqCst);
        scene.slow.store(false, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(20)).await;
        let later = scene.holding();
        drop(call_b);
        (first_a, first_b, finished, at_bound, later)
    });
    eprintln!(
        "A ready at first poll: {first_a}, B: {first_b}; finish_releases(3 s) A: {finished:?}; \
         lockers holding a at A's bound {at_bound:?}, 20 s later {later:?}"
    );
    assert!(
        !first_a && !first_b,
        "control: both calls were sending to the slow locker"
    );
    assert_eq!(
        at_bound,
        [true, false, false],
        "control: only locker 0, which refused A's unlock, holds a at A's bound"
    );
    assert!(
        matches!(finished, Err(Error::ReleasesPending { .. })),
        "control: A reports the unlock locker 0 refused as pending, got {finished:?}"
    );
    assert_eq!(
        later,
        [false, false, false],
        "locker 0 refused the unlock A took back and sent; 20 s after it came back (driven, \
         past B's copy being overdue) it still holds a: A queued nothing and started no drain \
         task because B, never polled again, took a copy"
    );
}
