//! Reproduces a past break: a `finish_releases` call dropped mid-send queues nothing and starts no drain task for the unlocks it took back when a second call, never polled again, took copies of them; the entry stays.
//!
//! `Dsync::finish_releases` (rustdoc), "Cancel safety": "it waits, and
//! hands unlocks to drain tasks that go on without it". docs/guarantees.md,
//! "Any runtime": "what it took back and did not see land (it failed, the
//! call reached its bound, or the call was dropped) goes back to the queue
//! with a drain task to send it".
//!
//! The scene, on tokio's paused clock: guard "a" is dropped on runtime
//! `r1`, which is not driven again, so its release is a batch on its way.
//! Locker 0 takes unlocks 1 s late (on their way to it). Call A,
//! `finish_releases(30 s)`, is polled once: it takes the batch back and
//! sends it. Call B, `finish_releases(30 s)`, is polled once: it takes
//! copies of A's batch and sends them, then is not polled again (nor
//! dropped). A is dropped while its unlock to locker 0 is on its way: since
//! B took a copy, A puts nothing back and starts no drain task. The runtime
//! is driven for 20 s more (B's copy is overdue after 10.1 s), yet nothing
//! ever sends locker 0 the unlock: it still holds "a".
#![cfg(feature = "testing")]

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::hooked::Late;
use crate::common::release_on_its_way::{poll_once, ReleaseOnItsWay};
use crate::common::{self};

const SEED: u64 = 7513;

#[test]
fn a_dropped_finish_releases_call_leaves_its_unlocks_to_a_drain_task_though_an_unpolled_call_took_copies(
) {
    let scene = ReleaseOnItsWay::new(SEED, |locker, slow| {
        locker.unlocks_late_while(slow, Late::Arriving, Duration::from_secs(1))
    });

    let paused = common::paused_runtime();
    let (first_a, first_b, later) = paused.block_on(async {
        let mut call_a = Box::pin(scene.ds.finish_releases(Duration::from_secs(30)));
        let mut call_b = Box::pin(scene.ds.finish_releases(Duration::from_secs(30)));
        let first_a = poll_once(&mut call_a).await;
        let first_b = poll_once(&mut call_b).await;
        // A is cancelled mid-send; B is not polled again (nor dropped).
        drop(call_a);
        scene.slow.store(false, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(20)).await;
        let later = scene.holding();
        drop(call_b);
        (first_a, first_b, later)
    });
    eprintln!(
        "A ready at first poll: {first_a}, B: {first_b}; lockers holding a 20 s after A was \
         dropped: {later:?}"
    );
    assert!(
        !first_a && !first_b,
        "control: both calls were sending to the slow locker"
    );
    assert_eq!(
        later,
        [false, false, false],
        "A was dropped with its unlock to locker 0 on its way; 20 s later (driven, past B's copy \
         being overdue) locker 0 still holds a: A put nothing back and started no drain task \
         because B, never polled again, took a copy"
    );
}
