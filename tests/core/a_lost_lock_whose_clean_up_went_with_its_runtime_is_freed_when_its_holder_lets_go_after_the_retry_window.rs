//! Reproduces a past break: a lost lock whose clean-up task went with its runtime queued its unlocks to wait for the holder, but they expired from the queue after `Timeouts::release_retry` without ever being sent; the holder let go later and its entries stayed on every locker.
//!
//! docs/guarantees.md, "A lost lock is freed once its holder lets go": "As
//! soon as the holder drops its guard (or `unlock()` returns
//! `Error::LockLost`), they go at once". "Any runtime": "a lost lock's
//! clean-up (sent once the safety margin has passed or its holder let go,
//! as the task would have)" is owed like any release; the one exception is
//! a loss declared on a runtime no longer driven "while its holder still
//! holds the guard. The entries then go when the holder lets go (on
//! whatever runtime, or none), or expire." `Timeouts::release_retry` only
//! caps how long *failed* unlocks are retried.
//!
//! What happens: three lockers, a lease of 4 s with a 2 s margin, and
//! `release_retry` of 300 ms. w locks "res" on runtime A; lockers 1 and 2
//! stop confirming its refreshes, so A's keeper declares the lock lost
//! and its clean-up waits for the margin or the holder. A is then shut
//! down while the holder keeps its guard: `CleanupOwed::drop` claims the
//! clean-up and queues an unlock per locker, held until the margin passes
//! or the holder lets go, but with `give_up` 300 ms after the loss
//! (`release::give_up_at`). The drain task drops them as expired long
//! before they are due. The holder drops its guard 1 s after the loss:
//! the clean-up is claimed already, so `claim_after_holder` only kicks the
//! (now empty) queue. Every locker answers, yet w's entries stay until the
//! lockers expire them (60 s), blocking every other client.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::holding;
use quorum_lock::testing::{CallKind, Route, TestCluster};
use quorum_lock::{Dsync, Lease, Timeouts};

const SEED: u64 = 36_322;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

#[test]
fn a_lost_lock_whose_clean_up_went_with_its_runtime_is_freed_when_its_holder_lets_go_after_the_retry_window(
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let cut = Arc::new(AtomicBool::new(false));
    let links = {
        let cut = cut.clone();
        cluster.relayed_lockers(move |i, kind, _| {
            if i >= 1 && kind == CallKind::Refresh && cut.load(Ordering::SeqCst) {
                Route::Lost("w's refreshes to lockers 1 and 2 are lost".into())
            } else {
                Route::Forward
            }
        })
    };
    let margin = Duration::from_secs(2);
    let w = Dsync::builder(links)
        .owner("w")
        .rng_seed(SEED)
        .lease(Lease {
            validity: Duration::from_secs(4),
            safety_margin: margin,
            refresh_interval: Duration::from_millis(200),
        })
        .timeouts(Timeouts {
            release_retry: Duration::from_millis(300),
            ..Timeouts::default()
        })
        .build()
        .expect("valid coordinator");

    let a = runtime();
    let guard = a.block_on(async {
        tokio::time::timeout(Duration::from_secs(5), w.rw_mutex(["res"]).unwrap().lock())
            .await
            .expect("in time")
            .expect("every locker grants")
    });
    let uid = guard.uid().to_string();
    cut.store(true, Ordering::SeqCst);
    let lost_at = a.block_on(async {
        for _ in 0..500 {
            if guard.is_lost() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Let A's keeper declare it and start its clean-up.
        tokio::time::sleep(Duration::from_millis(100)).await;
        Instant::now()
    });
    assert!(guard.is_lost(), "only locker 0 confirms w's refreshes");
    let at_loss = holding(cluster.lockers(), &uid);
    assert_eq!(
        at_loss,
        [true, true, true],
        "the entries are held for the margin"
    );

    // A goes, with the clean-up task waiting there; the holder keeps its
    // guard a while longer, then lets go (within the margin).
    a.shutdown_timeout(Duration::from_secs(1));
    std::thread::sleep(Duration::from_secs(1));
    let dropped_after = lost_at.elapsed();
    drop(guard);
    let dropped = Instant::now();
    let mut left = holding(cluster.lockers(), &uid);
    while dropped.elapsed() < Duration::from_secs(3) && left.iter().any(|h| *h) {
        std::thread::sleep(Duration::from_millis(50));
        left = holding(cluster.lockers(), &uid);
    }
    eprintln!(
        "the holder let go {dropped_after:?} after the loss; {:?} later w's entries are {left:?}",
        dropped.elapsed()
    );
    assert!(
        !left.iter().any(|h| *h),
        "every locker answers and the holder let go {dropped_after:?} after the loss, yet {:?} \
         later lockers {left:?} still hold w's entries (the clean-up's queued unlocks expired \
         after release_retry without being sent)",
        dropped.elapsed()
    );
}
