//! A release (an unlock or a resign) confirmed by a quorum counts no
//! polled locker as "never held this uid" on a refusal of its retry while
//! the first call to it, timed out on its way, may still grant.
//!
//! docs/election.md, "Observers see the truth, in order": "After a
//! `resign()` that returned `Ok`, `leader()` returns `None` or a newer
//! leader: the resigned term is on fewer lockers than a write quorum from
//! then on". docs/guarantees.md, "No leaks from cancellation or failure": "A lock
//! call that failed may have been applied (its reply was lost), so it is
//! unlocked like a grant". `WriteGuard::unlock` (src/lock/guard.rs):
//! "waits until a quorum of lockers is known not to hold it"; a confirmed
//! unlock leaves at most `n − W` lockers holding it.
//!
//! The break (before the fix): three lockers (write quorum 2); locker 2 keeps no
//! queues (it is polled). "x" holds "res" on lockers 1 and 2. w's
//! `lock()` sends uid U: locker 0 grants, locker 1 queues it, and the call
//! to locker 2 is held up on the wire for 3 s, so it times out at 1 s. The
//! wait asks locker 2 again (same uid) while locker 1's re-check is on its
//! way: locker 2 refuses at once (x holds it), and `record_reply`
//! overwrites the failure with the refusal. x lets go of locker 1, which
//! pushes w its grant: w wins with lockers 0 and 1. x lets go of locker
//! 2; at 3 s U's first call reaches it and is granted: w holds all three.
//! w unlocks while its unlock to locker 1 is lost: `begin_release` counts
//! locker 2 as refused (no unlock goes there), locker 0 confirms, and
//! 1 + 1 reaches the quorum: `unlock()` returns `Ok` while lockers 1 and 2,
//! a write quorum, still hold U, and another writer is refused.
//!
//! The campaign's scene is the same on the election's lock, with a new
//! value proclaimed before the resign; `leader()` then read w's term and
//! value on lockers 1 and 2 and reported w as leader.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::hooked::{Hooked, Optional};
use crate::common::{self, args, holding};
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, ImmediateLocker, LockMode, NetLocker};

/// Reproduces a past break: a confirmed resign left the resigned leader on a write quorum, and `leader()` still reported it: the release counted a polled locker as "never held this uid" by its retry's refusal, although the campaign's first call to it, timed out on the way, had granted it since.
#[tokio::test(start_paused = true)]
async fn a_confirmed_resign_counts_no_polled_locker_whose_timed_out_call_granted_after_its_retry_was_refused(
) {
    scene(36_333, Recipe::Election).await;
}

/// Reproduces a past break: `unlock()` reported a confirmed release while a write quorum still held the lock: it counted a polled locker as "never held this uid" by its retry's refusal, although the wait's first call to it, timed out on the way, had granted it since.
#[tokio::test(start_paused = true)]
async fn a_confirmed_unlock_counts_no_polled_locker_whose_timed_out_call_granted_after_its_retry_was_refused(
) {
    scene(36_332, Recipe::Lock).await;
}

#[derive(Clone, Copy, Debug)]
enum Recipe {
    /// w write-locks "res", then unlocks.
    Lock,
    /// w campaigns in election "e", proclaims, then resigns.
    Election,
}

async fn scene(seed: u64, recipe: Recipe) {
    eprintln!("seed {seed}, {recipe:?}");
    let cluster = TestCluster::new(3, seed);
    let resource = match recipe {
        Recipe::Lock => "res",
        Recipe::Election => "election/e",
    };
    let x = args("x", &[resource]);
    let (local1, local2) = (cluster.lockers()[1].clone(), cluster.lockers()[2].clone());
    for local in [&local1, &local2] {
        assert!(
            local.lock_now(&x, LockMode::Write).expect("answers"),
            "x holds {resource} on lockers 1 and 2"
        );
    }
    let calls = Arc::new([
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    ]);
    let first_uid: Arc<Mutex<Option<String>>> = Arc::default();
    let cut_unlock = Arc::new(AtomicBool::new(false));
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
            let (calls, first_uid, cut_unlock) =
                (calls.clone(), first_uid.clone(), cut_unlock.clone());
            Arc::new(Relay::new(inner, move |kind, a| {
                if &*a.owner != "w" {
                    return Route::Forward;
                }
                if kind == CallKind::Unlock && i == 1 && cut_unlock.load(Ordering::SeqCst) {
                    return Route::Lost("w's unlock to locker 1 is lost".into());
                }
                if kind != CallKind::Lock {
                    return Route::Forward;
                }
                let nth = calls[i].fetch_add(1, Ordering::SeqCst);
                match (i, nth) {
                    // Locker 1's re-check (1 s in) answers slowly.
                    (1, 1) => Route::SlowReply(Duration::from_millis(800)),
                    (2, 0) => {
                        *first_uid.lock().unwrap() = Some(a.uid.to_string());
                        Route::Late(Duration::from_secs(3))
                    }
                    _ => Route::Forward,
                }
            })) as Arc<dyn NetLocker>
        })
        .collect();
    let w = Dsync::builder(lockers)
        .owner("w")
        .rng_seed(seed)
        .build()
        .expect("valid coordinator");
    let y = common::seeded(cluster.net_lockers(), "y", seed + 1);

    enum Won {
        Guard(quorum_lock::WriteGuard),
        Lead(quorum_lock::Leadership),
    }
    let w_in = {
        let w = w.clone();
        tokio::spawn(async move {
            match recipe {
                Recipe::Lock => w.rw_mutex(["res"]).unwrap().lock().await.map(Won::Guard),
                Recipe::Election => w
                    .election("e")
                    .unwrap()
                    .campaign(&b"w-1"[..])
                    .await
                    .map(Won::Lead),
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let asked = calls[2].load(Ordering::SeqCst);
    assert!(asked >= 2, "locker 2 was asked again: {asked} calls");
    // x lets go of locker 1, which pushes w its grant.
    assert!(local1.unlock_now(&x, LockMode::Write).expect("answers"));
    let won = tokio::time::timeout(Duration::from_secs(1), w_in)
        .await
        .expect("w wins in time")
        .expect("the task ends")
        .expect("lockers 0 and 1 grant");
    let uid = match &won {
        Won::Guard(g) => g.uid().to_string(),
        Won::Lead(l) => l.uid().to_string(),
    };
    assert_eq!(
        Some(uid.clone()),
        first_uid.lock().unwrap().clone(),
        "the won uid is the one whose first call is on its way to locker 2"
    );
    assert_eq!(holding(cluster.lockers(), &uid), [true, true, false]);
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(local2.unlock_now(&x, LockMode::Write).expect("answers"));
    // U's first call reaches locker 2 at 3 s.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let before = holding(cluster.lockers(), &uid);
    assert_eq!(before, [true, true, true], "locker 2 granted U's late call");

    match won {
        Won::Guard(guard) => {
            cut_unlock.store(true, Ordering::SeqCst);
            let unlocked = tokio::time::timeout(Duration::from_secs(10), guard.unlock())
                .await
                .expect("unlock returns in time");
            let after = holding(cluster.lockers(), &uid);
            let other = y.rw_mutex(["res"]).unwrap().try_lock().await.map(|g| {
                let uid = g.uid().to_string();
                std::mem::forget(g);
                uid
            });
            eprintln!(
                "U {uid}: before the unlock {before:?}; unlock {unlocked:?}, then {after:?}; \
                 y's try_lock {other:?}"
            );
            let still = after.iter().filter(|h| **h).count();
            assert!(
                unlocked.is_err() || still <= 1,
                "unlock() reported a confirmed release (a write quorum of 2 of 3 known not to \
                 hold U), yet {still} lockers still hold it: {after:?} (y's try_lock: {other:?})"
            );
        }
        Won::Lead(mut leadership) => {
            let term = leadership.term();
            leadership
                .proclaim(&b"w-2"[..])
                .await
                .expect("w still leads and proclaims");
            cut_unlock.store(true, Ordering::SeqCst);
            let resigned = tokio::time::timeout(Duration::from_secs(10), leadership.resign())
                .await
                .expect("resign returns in time");
            let after = holding(cluster.lockers(), &uid);
            let read = y.election("e").unwrap().leader().await;
            eprintln!(
                "U {uid} (term {term}): before the resign {before:?}; resign {resigned:?}, then \
                 {after:?}; leader() {read:?}"
            );
            let still_w = matches!(&read, Ok(Some(leader)) if leader.term == term);
            assert!(
                resigned.is_err() || !still_w,
                "resign() returned Ok, yet leader() still reports the resigned term {term}: \
                 {read:?} (lockers holding U: {after:?})"
            );
        }
    }
}
