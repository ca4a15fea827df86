//! Reproduces two past breaks: a lost lock whose won wait's re-checks were dropped after the loss (their runtime shut down), or ended after it (their idle runtime ran again past their deadline), had its entries unlocked at once, so a reader was let in while the holder still held its guard, well within the safety margin.
//!
//! docs/guarantees.md, "Held locks stay alive, lost locks are reported":
//! the holder "learns at least 10 s [the safety margin] before any locker
//! can free it". "A lost lock is freed once its holder lets go": "The
//! entries of a lost lock are force-unlocked a safety margin after the
//! loss is declared, as expiry would free them ... the margin is the
//! holder's time to notice and stop the work the lock protects"; freeing
//! them at once "would let another client in (a reader, when the holder
//! still reaches half of an even cluster)" (src/lock/refresh.rs). "Any
//! runtime": "Every unlock is owed ... and so does a lost lock's clean-up
//! (sent once the safety margin has passed or its holder let go, as the
//! task would have)".
//!
//! What happens instead: four lockers (a write quorum of 3, a read quorum
//! of 2). "x" holds "res"; "w" waits for it on runtime A, and its
//! re-checks (about 1 s in) are delivered 20 s late on every link. x
//! unlocks and the lockers push w its grants: w wins while the four
//! re-checks are in flight, stragglers on A, which is then left idle. The
//! guard's refresh runs on runtime B (`loss_token()` was taken there). w's links
//! to lockers 2 and 3 are cut, so only lockers 0 and 1 confirm its
//! refreshes: B's keeper declares the lock lost (which begins its release)
//! and its clean-up waits out the 2 s margin. The holder keeps its guard.
//! A is shut down right after, and the stragglers are dropped armed with
//! their `release::Owed` (src/lock/wait_round.rs `wait_call`): since the
//! acquisition is released, `Owed::drop` queued a plain unlock (`holder:
//! None`), which the `Dsync`'s own runtime sent at once. Or A runs again
//! for a moment (a runtime stalled or not driven for a few seconds): the
//! stragglers' deadlines have passed, so they end as failed, and
//! `wait_call` sent each one's unlock at once (`release_one`). Lockers
//! 0 and 1 free w's entries, and "y" is granted a read lock of "res" a
//! fraction of a second after the loss, while w's guard is held and its
//! margin has most of its 2 s left.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{self, holding};
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, Lease, NetLocker};

/// What becomes of the acquiring runtime A, and so of the re-checks
/// waiting there, once the lock is lost.
#[derive(Clone, Copy, Debug)]
enum ThenA {
    ShutDown,
    RunsAgain,
}

#[test]
fn a_lost_lock_keeps_its_entries_for_the_safety_margin_when_its_re_checks_are_dropped() {
    scene(36_301, ThenA::ShutDown);
}

#[test]
fn a_lost_lock_keeps_its_entries_for_the_safety_margin_when_its_acquiring_runtime_runs_again() {
    scene(36_302, ThenA::RunsAgain);
}

fn scene(seed: u64, then: ThenA) {
    eprintln!("seed {seed}, then A {then:?}");
    let cluster = TestCluster::new(4, seed);
    let late = Arc::new(AtomicBool::new(false));
    let cut = Arc::new(AtomicBool::new(false));
    let delayed = Arc::new(AtomicUsize::new(0));
    let links: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let (late, cut, delayed) = (late.clone(), cut.clone(), delayed.clone());
            Arc::new(Relay::new(l, move |kind, _| {
                if i >= 2 && cut.load(Ordering::SeqCst) {
                    Route::Lost("w's link is cut".into())
                } else if kind == CallKind::Lock && late.load(Ordering::SeqCst) {
                    delayed.fetch_add(1, Ordering::SeqCst);
                    Route::Late(Duration::from_secs(20))
                } else {
                    Route::Forward
                }
            })) as Arc<dyn NetLocker>
        })
        .collect();
    let margin = Duration::from_secs(2);
    let w = Dsync::builder(links)
        .owner("w")
        .rng_seed(seed + 1)
        .lease(Lease {
            validity: Duration::from_secs(6),
            safety_margin: margin,
            refresh_interval: Duration::from_millis(200),
        })
        .build()
        .expect("valid coordinator");
    let x = common::seeded(cluster.net_lockers(), "x", seed);
    let y = common::seeded(cluster.net_lockers(), "y", seed + 2);

    let main = common::runtime();
    let held_x = main.block_on(async { x.rw_mutex(["res"]).unwrap().lock().await.unwrap() });

    let a = common::runtime();
    let mutex = w.rw_mutex(["res"]).unwrap();
    let wait = a.spawn(async move { mutex.lock().await });
    a.block_on(async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        late.store(true, Ordering::SeqCst);
        // Every locker is re-checked about 1 s in; wait until all four are.
        for _ in 0..100 {
            if delayed.load(Ordering::SeqCst) >= 4 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    late.store(false, Ordering::SeqCst);
    let in_flight = delayed.load(Ordering::SeqCst);
    assert!(
        in_flight >= 4,
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
        [true, true, true, true],
        "w holds every locker"
    );

    // From here A is not driven: its stragglers wait there. The guard's
    // refresh runs on B, where its loss token is taken; lockers 2 and 3
    // stop confirming it.
    let b = common::runtime();
    b.block_on(async {
        drop(guard.loss_token());
        tokio::time::sleep(Duration::from_millis(10)).await;
    });
    cut.store(true, Ordering::SeqCst);
    let lost_at = b.block_on(async {
        for _ in 0..500 {
            if guard.is_lost() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Instant::now()
    });
    assert!(
        guard.is_lost(),
        "only two of four lockers confirm w's refreshes"
    );
    // Let B's keeper declare it (which begins the release and starts the
    // clean-up that waits out the margin).
    b.block_on(async { tokio::time::sleep(Duration::from_millis(100)).await });
    let before = holding(cluster.lockers(), &uid);

    match then {
        ThenA::ShutDown => a.shutdown_timeout(Duration::from_secs(1)),
        // Its stragglers see their deadline passed.
        ThenA::RunsAgain => {
            a.block_on(async { tokio::time::sleep(Duration::from_millis(50)).await })
        }
    }
    b.block_on(async { tokio::time::sleep(Duration::from_millis(300)).await });
    let after = holding(cluster.lockers(), &uid);
    let read = b.block_on(async {
        y.rw_mutex(["res"]).unwrap().try_read().await.map(|g| {
            let uid = g.uid().to_string();
            std::mem::forget(g);
            uid
        })
    });
    let at = lost_at.elapsed();
    eprintln!(
        "w lost; its entries {before:?}, after A {then:?} {after:?}; {at:?} after the loss \
         y's try_read gave {read:?}"
    );
    assert!(
        at >= margin || read.is_err(),
        "w's guard is held and its loss was declared only {at:?} ago (safety margin {margin:?}), \
         yet its entries went from {before:?} to {after:?} and y was granted a read lock of \
         \"res\" ({read:?})"
    );
    drop(guard);
}
