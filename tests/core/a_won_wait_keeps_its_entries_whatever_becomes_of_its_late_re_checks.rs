//! A wait (or a campaign) that wins while its re-checks are still on their
//! way leaves those re-checks behind as stragglers on the runtime that
//! sent them. Whatever becomes of that runtime (shut down, or left idle
//! and run again past their deadline), the stragglers never free the
//! entries of a lock that is still held, nor of a lost one before its
//! safety margin has passed or its holder let go.
//!
//! docs/guarantees.md, "Held locks stay alive, lost locks are reported":
//! a held lock's entries stay until it is reported lost, and the holder
//! "learns at least 10 s [the safety margin] before any locker can free
//! it". "A lost lock is freed once its holder lets go": "The entries of a
//! lost lock are force-unlocked a safety margin after the loss is
//! declared, as expiry would free them ... the margin is the holder's time
//! to notice and stop the work the lock protects"; freeing them at once
//! "would let another client in (a reader, when the holder still reaches
//! half of an even cluster)". "Any runtime": "Every unlock is owed ... and
//! so does a lost lock's clean-up (sent once the safety margin has passed
//! or its holder let go, as the task would have)". docs/election.md, "One
//! leader at a time": a leader learns that it lost the lead before any
//! locker can free it for the next candidate.
//!
//! Every scene: "x" holds "res" (or leads election "e"); "w" waits for it
//! (or campaigns) on runtime A, and its re-checks (about 1 s in) are
//! delivered 20 s late on every link. x lets go and the lockers push w its
//! grants: w wins while every re-check is in flight, stragglers on A,
//! which is then left idle. The guard's (or leadership's) refresh runs on
//! runtime B, where its loss token is taken. Then either the lock stays
//! held and A shuts down, or w's links to some lockers are cut so that B's
//! keeper declares the lock lost (its clean-up waits out the 2 s margin)
//! while w keeps its guard, and A shuts down or runs again. A third client
//! then tries the lock (or a campaign).
//!
//! The breaks: the stragglers were dropped armed with their
//! `release::Owed` (src/lock/wait_round.rs `wait_call`), whose unlocks
//! were sent at once by the `Dsync`'s own runtime; or they ended as failed
//! past their deadline and `wait_call` sent each one's unlock at once
//! (`release_one`). Either freed w's entries while it still held them.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{self, holding};
use quorum_lock::testing::{CallKind, Route, TestCluster};
use quorum_lock::{Dsync, Leadership, Lease, WriteGuard};

/// Reproduces a past break: a wait that won while its re-checks were still on their way, whose runtime then shut down, had its own live entries unlocked by the re-checks' owed unlocks, so a second writer took the lock while the first guard was held and not lost.
#[test]
fn a_won_wait_whose_re_check_is_dropped_by_its_runtime_shutting_down_keeps_its_entries() {
    scene(Scene {
        seed: 36_291,
        lockers: 3,
        recipe: Recipe::Lock,
        then: Then::HeldWhileAShutsDown,
    });
}

/// Reproduces a past break: a campaign won while its re-checks were still on their way, whose runtime then shut down, had its election lock's entries unlocked by those re-checks' owed unlocks, so a second candidate became leader while the first still led, not lost.
#[test]
fn a_leader_whose_campaigns_re_checks_are_dropped_by_its_runtime_shutting_down_stays_the_only_leader(
) {
    scene(Scene {
        seed: 36_294,
        lockers: 3,
        recipe: Recipe::Election,
        then: Then::HeldWhileAShutsDown,
    });
}

/// Reproduces a past break: a lost lock whose won wait's re-checks were dropped after the loss (their runtime shut down) had its entries unlocked at once, so a reader was let in while the holder still held its guard, well within the safety margin.
#[test]
fn a_lost_lock_keeps_its_entries_for_the_safety_margin_when_its_re_checks_are_dropped() {
    scene(Scene {
        seed: 36_301,
        lockers: 4,
        recipe: Recipe::Lock,
        then: Then::Lost {
            answers_again: false,
            a: ThenA::ShutDown,
        },
    });
}

/// Reproduces a past break: a lost lock whose won wait's re-checks ended after the loss (their idle runtime ran again past their deadline) had its entries unlocked at once, so a reader was let in while the holder still held its guard, well within the safety margin.
#[test]
fn a_lost_lock_keeps_its_entries_for_the_safety_margin_when_its_acquiring_runtime_runs_again() {
    scene(Scene {
        seed: 36_302,
        lockers: 4,
        recipe: Recipe::Lock,
        then: Then::Lost {
            answers_again: false,
            a: ThenA::RunsAgain,
        },
    });
}

/// Reproduces a past break: a lost write lock whose won wait's re-checks were dropped after the loss (their runtime shut down) had its entries unlocked at once by their owed unlocks, so a second writer was granted the lock a fraction of a second after the loss, while the first still held its guard, within the safety margin.
#[test]
fn no_second_writer_within_the_safety_margin_of_a_lost_lock_whose_re_checks_are_dropped() {
    scene(Scene {
        seed: 36_303,
        lockers: 3,
        recipe: Recipe::Lock,
        then: Then::Lost {
            answers_again: true,
            a: ThenA::ShutDown,
        },
    });
}

/// Reproduces a past break: a lost leadership whose campaign's re-checks were dropped after the loss (their runtime shut down) had its election lock unlocked at once by their owed unlocks, so a second candidate led a fraction of a second after the loss, while the first still held its `Leadership`, within the safety margin.
#[test]
fn no_second_leader_within_the_safety_margin_of_a_lost_leadership_whose_re_checks_are_dropped() {
    scene(Scene {
        seed: 36_305,
        lockers: 3,
        recipe: Recipe::Election,
        then: Then::Lost {
            answers_again: true,
            a: ThenA::ShutDown,
        },
    });
}

#[derive(Clone, Copy, Debug)]
enum Recipe {
    /// x and w write-lock "res".
    Lock,
    /// x and w campaign in election "e".
    Election,
}

#[derive(Clone, Copy, Debug)]
enum Then {
    /// w's lock stays held (its refresh confirmed) while A shuts down.
    HeldWhileAShutsDown,
    /// w's links to all but ⌊n/2⌋ lockers are cut until the lock
    /// is declared lost; they answer again before A's fate if
    /// `answers_again`.
    Lost { answers_again: bool, a: ThenA },
}

/// What becomes of the acquiring runtime A, and so of the re-checks
/// waiting there, once the lock is lost.
#[derive(Clone, Copy, Debug)]
enum ThenA {
    ShutDown,
    /// Its stragglers see their deadline passed.
    RunsAgain,
}

#[derive(Clone, Copy, Debug)]
struct Scene {
    seed: u64,
    lockers: usize,
    recipe: Recipe,
    then: Then,
}

/// What w won.
enum Won {
    Guard(WriteGuard),
    Lead(Leadership),
}

impl Won {
    fn uid(&self) -> String {
        match self {
            Won::Guard(g) => g.uid().to_string(),
            Won::Lead(l) => l.uid().to_string(),
        }
    }

    fn is_lost(&self) -> bool {
        match self {
            Won::Guard(g) => g.is_lost(),
            Won::Lead(l) => l.is_lost(),
        }
    }

    /// Makes the current runtime refresh it (a `lost()` future would have
    /// to be polled there to do so).
    fn refresh_here(&self) {
        match self {
            Won::Guard(g) => drop(g.loss_token()),
            Won::Lead(l) => drop(l.loss_token()),
        }
    }
}

fn scene(s: Scene) {
    let Scene {
        seed,
        lockers: n,
        recipe,
        then,
    } = s;
    eprintln!("seed {seed}, {s:?}");
    let cluster = TestCluster::new(n, seed);
    // When `cut`, w reaches only the first ⌊n/2⌋ lockers: less than a
    // write quorum, so its refreshes fail.
    let cut_from = n / 2;
    let late = Arc::new(AtomicBool::new(false));
    let cut = Arc::new(AtomicBool::new(false));
    let delayed = Arc::new(AtomicUsize::new(0));
    let links = {
        let (late, cut, delayed) = (late.clone(), cut.clone(), delayed.clone());
        cluster.relayed_lockers(move |i, kind, _| {
            if i >= cut_from && cut.load(Ordering::SeqCst) {
                Route::Lost("w's link is cut".into())
            } else if kind == CallKind::Lock && late.load(Ordering::SeqCst) {
                delayed.fetch_add(1, Ordering::SeqCst);
                Route::Late(Duration::from_secs(20))
            } else {
                Route::Forward
            }
        })
    };
    let margin = Duration::from_secs(2);
    let w = match then {
        // The default lease: a refresh every 10 s, well past the scene.
        Then::HeldWhileAShutsDown => common::seeded(links, "w", seed + 1),
        Then::Lost { .. } => Dsync::builder(links)
            .owner("w")
            .rng_seed(seed + 1)
            .lease(Lease {
                validity: Duration::from_secs(6),
                safety_margin: margin,
                refresh_interval: Duration::from_millis(200),
            })
            .build()
            .expect("valid coordinator"),
    };
    let x = common::seeded(cluster.net_lockers(), "x", seed);
    let third = common::seeded(cluster.net_lockers(), "z", seed + 2);

    let main = common::runtime();
    let a = common::runtime();
    let won = match recipe {
        Recipe::Lock => {
            let held_x =
                main.block_on(async { x.rw_mutex(["res"]).unwrap().lock().await.unwrap() });
            let mutex = w.rw_mutex(["res"]).unwrap();
            let wait = a.spawn(async move { mutex.lock().await });
            delay_re_checks(&a, &late, &delayed, n);
            main.block_on(async { held_x.unlock().await.unwrap() });
            Won::Guard(
                a.block_on(async { tokio::time::timeout(Duration::from_secs(2), wait).await })
                    .expect("w is pushed its grants")
                    .expect("the wait task ends")
                    .expect("w wins"),
            )
        }
        Recipe::Election => {
            let mut leading_x = main
                .block_on(async { x.election("e").unwrap().campaign(&b"x"[..]).await.unwrap() });
            let election = w.election("e").unwrap();
            let campaign = a.spawn(async move { election.campaign(&b"w"[..]).await });
            delay_re_checks(&a, &late, &delayed, n);
            main.block_on(async { leading_x.resign().await.unwrap() });
            Won::Lead(
                a.block_on(async { tokio::time::timeout(Duration::from_secs(2), campaign).await })
                    .expect("w is pushed its grants")
                    .expect("the campaign task ends")
                    .expect("w leads"),
            )
        }
    };
    let uid = won.uid();
    assert_eq!(
        holding(cluster.lockers(), &uid),
        vec![true; n],
        "w holds every locker"
    );

    // From here A is not driven: its stragglers wait there. w's refresh
    // runs on B, where its loss token is taken.
    let b = common::runtime();
    b.block_on(async {
        won.refresh_here();
        tokio::time::sleep(Duration::from_millis(10)).await;
    });
    let try_third = || {
        b.block_on(async {
            match recipe {
                // With its links cut, w still reaches half of an even
                // cluster: a reader is the one let in.
                Recipe::Lock if n % 2 == 0 => third
                    .rw_mutex(["res"])
                    .unwrap()
                    .try_read()
                    .await
                    .map(std::mem::forget),
                Recipe::Lock => third
                    .rw_mutex(["res"])
                    .unwrap()
                    .try_lock()
                    .await
                    .map(std::mem::forget),
                Recipe::Election => third
                    .election("e")
                    .unwrap()
                    .try_campaign(&b"z"[..])
                    .await
                    .map(std::mem::forget),
            }
        })
    };

    match then {
        Then::HeldWhileAShutsDown => {
            assert!(!won.is_lost(), "w's lock is held");
            a.shutdown_timeout(Duration::from_secs(1));
            let shut = Instant::now();
            // Well within the refresh interval (10 s) and the 20 s delay
            // of the re-checks: nothing may free w's entries yet.
            let mut taken = None;
            let mut left = holding(cluster.lockers(), &uid);
            while shut.elapsed() < Duration::from_secs(3) {
                left = holding(cluster.lockers(), &uid);
                if left.iter().filter(|h| **h).count() < 2 {
                    taken = Some(try_third());
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let w_lost = won.is_lost();
            // A leader told of its loss has stopped leading; a lock's
            // scene asks more: its entries were never to be freed.
            let may_be_taken = w_lost && matches!(recipe, Recipe::Election);
            eprintln!(
                "{:?} after A shut down: w's entries {left:?}, w lost {w_lost}, z's try {taken:?}",
                shut.elapsed()
            );
            assert!(
                left.iter().filter(|h| **h).count() >= 2
                    && (may_be_taken || !matches!(taken, Some(Ok(_)))),
                "w holds \"res\" (lost: {w_lost}), yet {:?} after its acquiring runtime shut \
                 down its entries are {left:?} and z's {recipe:?} try gave {taken:?}",
                shut.elapsed()
            );
        }
        Then::Lost {
            answers_again,
            a: then_a,
        } => {
            cut.store(true, Ordering::SeqCst);
            let lost_at = b.block_on(async {
                for _ in 0..500 {
                    if won.is_lost() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Instant::now()
            });
            assert!(
                won.is_lost(),
                "less than a write quorum confirms w's refreshes"
            );
            // Let B's keeper declare it (which begins the release and
            // starts the clean-up that waits out the margin).
            b.block_on(async { tokio::time::sleep(Duration::from_millis(100)).await });
            let before = holding(cluster.lockers(), &uid);
            if answers_again {
                cut.store(false, Ordering::SeqCst);
            }
            match then_a {
                ThenA::ShutDown => a.shutdown_timeout(Duration::from_secs(1)),
                ThenA::RunsAgain => {
                    a.block_on(async { tokio::time::sleep(Duration::from_millis(50)).await })
                }
            }
            b.block_on(async { tokio::time::sleep(Duration::from_millis(300)).await });
            let after = holding(cluster.lockers(), &uid);
            let second = try_third();
            let at = lost_at.elapsed();
            eprintln!(
                "w lost; its entries {before:?}, after A {then_a:?} {after:?}; {at:?} after the \
                 loss z's try gave {second:?}"
            );
            assert!(
                at >= margin || second.is_err(),
                "w still holds what it won and its loss was declared only {at:?} ago (safety \
                 margin {margin:?}), yet its entries went from {before:?} to {after:?} and z's \
                 {recipe:?} try was granted"
            );
        }
    }
    drop(won);
}

/// Lets w's wait run for 400 ms on `a`, then delays its lock calls until
/// every locker's re-check (about 1 s in) is on its way.
fn delay_re_checks(
    a: &tokio::runtime::Runtime,
    late: &AtomicBool,
    delayed: &AtomicUsize,
    lockers: usize,
) {
    a.block_on(async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        late.store(true, Ordering::SeqCst);
        for _ in 0..100 {
            if delayed.load(Ordering::SeqCst) >= lockers {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    late.store(false, Ordering::SeqCst);
    let in_flight = delayed.load(Ordering::SeqCst);
    assert!(
        in_flight >= lockers,
        "w's re-checks are on their way: {in_flight}"
    );
}
