//! Reproduces a past break: a wait that won while its re-checks were still on their way, whose runtime then shut down, had its own live entries unlocked by the re-checks' owed unlocks, so a second writer took the lock while the first guard was held and not lost.
//!
//! docs/guarantees.md, "Quorum intersection": "any two write quorums meet
//! ... and a locker never grants conflicting modes"; "Held locks stay
//! alive, lost locks are reported": a held lock's entries stay until it is
//! reported lost, and "here it learns at least 10 s before any locker can
//! free it". "Any runtime": "every held lock is refreshed ... as long as
//! any runtime that holds one of the locks is alive and driven, whichever
//! runtime locked first and whether or not that one still exists."
//!
//! What happens instead: "x" holds "res"; "w" waits for it on runtime A,
//! and its re-checks (about 1 s in) are delivered 20 s late on every link.
//! x unlocks and the lockers push w its grants: w wins while the three
//! re-checks are still in flight, and they become stragglers on A. The
//! guard is kept (its refresh runs on runtime B, where `lost()` is used)
//! and A is shut down. The stragglers are dropped there armed with their
//! `release::Owed` (src/lock/wait_round.rs `wait_call`), which queues an
//! unlock of w's uid on every locker; the drain task on the `Dsync`'s own
//! runtime sends them at once, removing the entries of the lock w still
//! holds. "y" then write-locks "res" while w's guard says it is not lost.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{self, holding};
use quorum_lock::testing::TestCluster;
use quorum_lock::NetLocker;

const SEED: u64 = 36_291;

#[test]
fn a_won_wait_whose_re_check_is_dropped_by_its_runtime_shutting_down_keeps_its_entries() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let late = Arc::new(AtomicBool::new(false));
    let delayed = Arc::new(AtomicUsize::new(0));
    let links: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .map(|l| common::late_locks(l, late.clone(), delayed.clone(), Duration::from_secs(20)))
        .collect();
    let x = common::seeded(cluster.net_lockers(), "x", SEED);
    let w = common::seeded(links, "w", SEED + 1);
    let y = common::seeded(cluster.net_lockers(), "y", SEED + 2);

    let main = common::runtime();
    let held_x = main.block_on(async { x.rw_mutex(["res"]).unwrap().lock().await.unwrap() });

    let a = common::runtime();
    let mutex = w.rw_mutex(["res"]).unwrap();
    let wait = a.spawn(async move { mutex.lock().await });
    a.block_on(async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        late.store(true, Ordering::SeqCst);
        // Every locker is re-checked about 1 s in; wait until all three are.
        for _ in 0..100 {
            if delayed.load(Ordering::SeqCst) >= 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    late.store(false, Ordering::SeqCst);
    let in_flight = delayed.load(Ordering::SeqCst);
    assert!(
        in_flight >= 3,
        "w's re-checks are on their way: {in_flight}"
    );
    main.block_on(async { held_x.unlock().await.unwrap() });
    let guard = a
        .block_on(async { tokio::time::timeout(Duration::from_secs(2), wait).await })
        .expect("w is pushed its grants")
        .expect("the wait task ends")
        .expect("w wins");
    let uid = guard.uid().to_string();
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [true, true, true],
        "w holds every locker"
    );

    // The guard lives on: runtime B uses its loss signal, so its refresh
    // runs there. A, where it was acquired, shuts down.
    let b = common::runtime();
    let lost = b.block_on(async {
        // Its loss token makes B refresh it (a `lost()` future would have
        // to be polled there to do so).
        drop(guard.loss_token());
        tokio::time::sleep(Duration::from_millis(10)).await;
        guard.is_lost()
    });
    assert!(!lost, "w's lock is held");
    a.shutdown_timeout(Duration::from_secs(1));
    let shut = Instant::now();

    // Well within the refresh interval (10 s) and the 20 s delay of the
    // re-checks: nothing may free w's entries yet.
    let mut taken = None;
    let mut left = holding(cluster.lockers(), &uid);
    while shut.elapsed() < Duration::from_secs(3) {
        left = holding(cluster.lockers(), &uid);
        if left.iter().filter(|h| **h).count() < 2 {
            taken = Some(b.block_on(async {
                y.rw_mutex(["res"]).unwrap().try_lock().await.map(|g| {
                    let uid = g.uid().to_string();
                    std::mem::forget(g);
                    uid
                })
            }));
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let w_lost = guard.is_lost();
    eprintln!(
        "{:?} after A shut down: w's entries {left:?}, w lost {w_lost}, y's try_lock {taken:?}",
        shut.elapsed()
    );
    assert!(
        left.iter().filter(|h| **h).count() >= 2 && !matches!(taken, Some(Ok(_))),
        "w holds \"res\" (its guard lives, lost: {w_lost}), yet {:?} after its acquiring runtime \
         shut down its entries are {left:?} and y's write try_lock of \"res\" gave {taken:?}",
        shut.elapsed()
    );
    drop(guard);
}
