//! Reproduces a past break: a wait's retry to a locker without queues, granted there but parked on a runtime no longer driven, kept its entry until it expired after the guard was dropped: the release counted the locker by its first answer, a refusal, and neither unlocked it nor watched it as a straggler.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": dropping
//! "a guard never leaves an entry behind on a reachable locker: calls
//! still in flight finish in the background and undo any grant they
//! receive". "Any runtime": "A call still in flight on a runtime that is
//! no longer driven neither finishes nor is dropped: when its lock is
//! released, a locker whose call has not answered by the time it must
//! have ended (`Timeouts::acquire`, plus 100 ms) is sent the unlock by the
//! release's side".
//!
//! What happens instead: three lockers; locker 2 keeps no queues (it is
//! polled), and "y" holds "res" there. w's `lock()` on runtime A: locker 1
//! grants at once, locker 0's grant is slow (300 ms), locker 2 refuses.
//! The wait asks locker 2 again after a backoff; y has let go by then, so
//! locker 2 grants, but its reply is slow. Locker 0's grant wins the wait
//! with lockers 0 and 1, and the retry to locker 2 becomes a straggler
//! handed to A, which is then no longer driven. The guard is dropped on a
//! plain thread: `Acquisition::begin_release` files locker 2 by its last
//! answer, the refusal ("they never held this uid"), so it is neither a
//! target nor among the calls in flight for `release::watch_stragglers`.
//! Locker 2, which answers every call, keeps w's entry until it expires.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::hooked::{Hooked, Optional};
use crate::common::{self, args, holding};
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, ImmediateLocker, LockMode, NetLocker};

const SEED: u64 = 36_313;

#[test]
fn a_released_lock_frees_a_polled_locker_whose_retry_waits_on_an_idle_runtime() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let y = args("y", &["res"]);
    let local2 = cluster.lockers()[2].clone();
    assert!(
        local2
            .lock_now(&y, LockMode::Write)
            .expect("locker 2 answers"),
        "y holds res on locker 2"
    );
    let calls_to_2 = Arc::new(AtomicUsize::new(0));
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let inner = if i == 2 {
                Hooked::new(l)
                    .lacking(&[Optional::LockWait, Optional::Queues])
                    .shared()
            } else {
                l
            };
            let (calls_to_2, local2, y) = (calls_to_2.clone(), local2.clone(), y.clone());
            Arc::new(Relay::new(inner, move |kind, a| {
                if kind != CallKind::Lock || &*a.owner != "w" {
                    return Route::Forward;
                }
                match i {
                    0 => Route::SlowReply(Duration::from_millis(300)),
                    2 if calls_to_2.fetch_add(1, Ordering::SeqCst) >= 1 => {
                        // The retry: y has let go by the time it arrives.
                        let _ = local2.unlock_now(&y, LockMode::Write);
                        Route::SlowReply(Duration::from_secs(30))
                    }
                    _ => Route::Forward,
                }
            })) as Arc<dyn NetLocker>
        })
        .collect();
    let w = Dsync::builder(lockers)
        .owner("w")
        .rng_seed(SEED)
        .build()
        .expect("valid coordinator");

    let a = common::runtime();
    let guard = a.block_on(async {
        tokio::time::timeout(Duration::from_secs(5), w.rw_mutex(["res"]).unwrap().lock())
            .await
            .expect("in time")
            .expect("lockers 0 and 1 grant")
    });
    let uid = guard.uid().to_owned();
    let asked = calls_to_2.load(Ordering::SeqCst);
    let granted = holding(cluster.lockers(), &uid);
    assert!(asked >= 2, "locker 2 was asked again: {asked} calls");
    assert_eq!(
        granted,
        [true, true, true],
        "locker 2 granted the retry, whose reply is on its way"
    );
    // A is alive but no longer driven. The guard goes on this plain thread.
    drop(guard);
    let dropped = Instant::now();
    let mut left = holding(cluster.lockers(), &uid);
    while dropped.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(20));
        left = holding(cluster.lockers(), &uid);
    }
    eprintln!(
        "{:?} after the guard was dropped: entries {left:?}",
        dropped.elapsed()
    );
    assert!(
        !left.iter().any(|h| *h),
        "every locker answers, yet {:?} after w's guard was dropped (the straggler watch is due \
         after 1.1 s) locker 2 keeps the grant of the retry parked on the idle runtime: {left:?}",
        dropped.elapsed()
    );
    drop(a);
}
