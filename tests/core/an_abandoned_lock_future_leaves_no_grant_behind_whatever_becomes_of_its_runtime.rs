//! A lock future (or a campaign) abandoned while grants it received are
//! still on their way back leaves none of them behind, whatever becomes of
//! the runtime that polled it: shut down with the future on it, ended
//! before the future is dropped outside any runtime, or left idle.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": "Dropping a
//! `lock()`/`read()` future ... never leaves an entry behind on a
//! reachable locker: calls still in flight finish in the background and
//! undo any grant they receive." "Any runtime": "Every unlock is owed from
//! the moment its release is planned: a release task that a runtime shut
//! down drops unrun or cuts short queues what it had not done ... The queue
//! is then sent by the next drain task on any runtime: ... or
//! `Dsync::finish_releases`"; "What is started outside any runtime (an
//! `unlock()` on a plain thread, a guard, a lock future or a permit dropped
//! there) runs on a runtime the `Dsync` keeps for such work ... So an
//! acquiring runtime that is idle or gone holds nothing up."
//! `Dsync::finish_releases` (src/lock/dsync.rs) waits for "the grants and
//! places of abandoned waits (a `lock_timeout` that gave up, a dropped
//! future)". docs/election.md, "Cancel safety": "A cancelled campaign
//! leaves no place in line, grant or value behind: its undo goes out when
//! it is dropped".
//!
//! Every scene: nodes 1 and 2 apply the lock at once but their replies
//! take 3 s (a `Relay` routing `Lock` calls `SlowReply`); node 0 grants at
//! once. The future runs for 200 ms on runtime X, and then X or the future
//! meets its fate.
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common;
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, NetLocker};

/// Reproduces a past break: a lock future dropped by the shutdown of the runtime it ran on, while grants it had received were still on their way back, left those grants on lockers that answer until they expired, and `finish_releases` said every release was done (its stragglers were spawned onto the runtime shutting down and dropped unrun).
#[test]
fn a_lock_future_cut_short_by_its_runtime_shutting_down_leaves_no_grant_behind() {
    scene(36_282, Abandoned::CutShortByShutdown(Recipe::Lock));
}

/// Reproduces a past break: a campaign dropped by the shutdown of the runtime it ran on, while grants of the election's lock were still on their way back, left those grants on lockers that answer until they expired, and `finish_releases` said every release was done.
#[test]
fn a_campaign_cut_short_by_its_runtime_shutting_down_leaves_no_grant_behind() {
    scene(36_286, Abandoned::CutShortByShutdown(Recipe::Election));
}

/// Reproduces a past break: a lock future polled on a runtime that then ended, and dropped outside any runtime while grants it had received were still on their way back, left those grants on lockers that answer until they expired (its stragglers waited on the ended runtime's timers, and polling them panicked).
#[test]
fn a_lock_future_dropped_outside_a_runtime_after_its_runtime_ended_leaves_no_grant_behind() {
    scene(36_283, Abandoned::DroppedOutsideAfterItsRuntimeEnded);
}

/// Reproduces a past break: a lock future dropped outside any runtime while the runtime that polled it sat idle left the grants still on their way back on lockers that answer, its stragglers waiting on that runtime's timers.
#[test]
fn a_lock_future_dropped_outside_a_runtime_while_its_runtime_is_idle_undoes_grants_still_on_their_way(
) {
    scene(36_284, Abandoned::DroppedOutsideWhileItsRuntimeIsIdle);
}

#[derive(Clone, Copy, Debug)]
enum Recipe {
    /// `try_lock` of "x".
    Lock,
    /// A campaign in election "e" (the lock of `election/e`).
    Election,
}

#[derive(Clone, Copy, Debug)]
enum Abandoned {
    /// Runtime X, running the future in a task, is shut down.
    CutShortByShutdown(Recipe),
    /// X is dropped, then the future, on the test thread.
    DroppedOutsideAfterItsRuntimeEnded,
    /// The future is dropped on the test thread while X lives on, idle.
    DroppedOutsideWhileItsRuntimeIsIdle,
}

fn scene(seed: u64, abandoned: Abandoned) {
    eprintln!("seed {seed}, {abandoned:?}");
    let cluster = TestCluster::new(3, seed);
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            if i == 0 {
                return l;
            }
            Arc::new(Relay::new(l, |kind, _| {
                if kind == CallKind::Lock {
                    Route::SlowReply(Duration::from_secs(3))
                } else {
                    Route::Forward
                }
            })) as Arc<dyn NetLocker>
        })
        .collect();
    let ds = Dsync::builder(lockers)
        .owner("a")
        .rng_seed(seed)
        .build()
        .expect("valid coordinator");
    let resource = match abandoned {
        Abandoned::CutShortByShutdown(Recipe::Election) => "election/e",
        _ => "x",
    };
    let holding = || -> Vec<bool> {
        cluster
            .lockers()
            .iter()
            .map(|node| node.snapshot().iter().any(|e| e.resource == resource))
            .collect()
    };
    let x = common::runtime();
    let mut idle_x = None;
    match abandoned {
        Abandoned::CutShortByShutdown(recipe) => {
            x.block_on(async {
                match recipe {
                    Recipe::Lock => {
                        let mutex = ds.rw_mutex(["x"]).unwrap();
                        tokio::spawn(async move {
                            let _ = mutex.try_lock().await;
                        });
                    }
                    Recipe::Election => {
                        let election = ds.election("e").unwrap();
                        tokio::spawn(async move {
                            let _ = election.campaign(b"a".to_vec()).await;
                        });
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            });
            assert_eq!(
                holding(),
                [true, true, true],
                "every node applied the lock; two replies are still on their way"
            );
            x.shutdown_timeout(Duration::from_secs(1));
        }
        Abandoned::DroppedOutsideAfterItsRuntimeEnded
        | Abandoned::DroppedOutsideWhileItsRuntimeIsIdle => {
            let mutex = ds.rw_mutex(["x"]).unwrap();
            let mut locking = Box::pin(mutex.try_lock());
            let polled = x.block_on(async {
                tokio::time::timeout(Duration::from_millis(200), &mut locking).await
            });
            assert!(
                polled.is_err(),
                "no quorum yet: two replies are on their way"
            );
            assert_eq!(holding(), [true, true, true], "every node applied the lock");
            if matches!(abandoned, Abandoned::DroppedOutsideAfterItsRuntimeEnded) {
                drop(x);
            } else {
                idle_x = Some(x);
            }
            drop(locking);
        }
    }
    let abandoned_at = Instant::now();
    let finishing = |within| Some(common::runtime().block_on(ds.finish_releases(within)));
    let finished = match abandoned {
        Abandoned::CutShortByShutdown(_) => finishing(Duration::from_secs(2)),
        Abandoned::DroppedOutsideAfterItsRuntimeEnded => finishing(Duration::from_secs(5)),
        Abandoned::DroppedOutsideWhileItsRuntimeIsIdle => None,
    };
    // Bounded: whatever is still running has a few seconds more to land.
    let mut left = holding();
    while left.iter().any(|h| *h) && abandoned_at.elapsed() < Duration::from_secs(6) {
        std::thread::sleep(Duration::from_millis(20));
        left = holding();
    }
    let at = abandoned_at.elapsed();
    eprintln!("{at:?} after: finish_releases {finished:?}, nodes holding {resource} {left:?}");
    assert!(
        at < Duration::from_secs(30),
        "checked long before the 60 s validity could expire the entries: {at:?}"
    );
    assert!(
        !left.iter().any(|h| *h),
        "the future was abandoned ({abandoned:?}) and, {at:?} later, nodes that answer every \
         call still hold its grant: {left:?} (finish_releases gave {finished:?})"
    );
    drop(idle_x);
}
