//! A lost lock's entries go once its holder lets go (or a safety margin
//! after the loss), and `finish_releases` waits for them, whatever becomes
//! of the runtime whose refresh lane declared the loss: shut down, or left
//! idle (a current-thread runtime whose `block_on` returned), before or
//! after its clean-up began.
//!
//! docs/guarantees.md, "A lost lock is freed once its holder lets go": "The
//! entries of a lost lock are force-unlocked a safety margin after the loss
//! is declared ... As soon as the holder drops its guard (or `unlock()`
//! returns `Error::LockLost`), they go at once instead", and
//! "`Dsync::finish_releases(bound)` waits for these releases". "Any
//! runtime": "Every unlock is owed from the moment its release is planned:
//! a release task that a runtime shut down drops unrun or cuts short queues
//! what it had not done, and so does a lost lock's clean-up (sent once the
//! safety margin has passed or its holder let go, as the task would
//! have)"; "What is started outside any runtime (an `unlock()` on a plain
//! thread, a guard ... dropped there) runs on a runtime the `Dsync` keeps
//! for such work ... So an acquiring runtime that is idle or gone holds
//! nothing up." `Dsync::finish_releases` (src/lock/dsync.rs) fails with
//! `ReleasesPending` only "when releases are still running at the bound (a
//! lock server is unreachable, say)".
//!
//! Every scene: "x" is taken on runtime X, refreshed every 100 ms with a
//! 2 s margin; lockers 0 and 1 are forced open by name, so X's lane sees a
//! quorum answer "not held" and declares the loss. Locker 2, answering
//! all along, still holds the entry; it expires only a validity after the
//! last refresh, long after each scene's checks.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::executor::block_on;
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, Error, Lease, LockArgs, LockerConfig, NetLocker, WriteGuard};

use crate::common::{self, holding};

/// Reproduces a past break: a lost lock whose loss a refresh lane declared on a runtime that then ended kept its entry on the locker still holding it after its holder unlocked (the lane's clean-up went with the runtime and queued nothing; `unlock()` found the lease taken and only returned `LockLost`).
#[test]
fn a_lost_lock_declared_on_a_runtime_gone_since_is_freed_once_its_holder_unlocks() {
    let lost = lost_on_x(
        3627,
        Duration::from_secs(6),
        Slow::No,
        Duration::from_millis(400),
    );
    let Lost {
        cluster, guard, x, ..
    } = lost;
    x.shutdown_timeout(Duration::from_secs(1));
    let shut = Instant::now();
    let uid = guard.uid().to_owned();
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [false, false, true],
        "locker 2 still holds the lost lock's entry before the unlock"
    );
    let unlocked = block_on(guard.unlock());
    assert!(
        matches!(unlocked, Err(Error::LockLost)),
        "unlock says the lock was lost: {unlocked:?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let left = holding(cluster.lockers(), &uid);
    let at = shut.elapsed();
    eprintln!("{at:?} after the acquiring runtime ended, lockers holding the uid: {left:?}");
    assert!(
        at < Duration::from_millis(4500),
        "checked before the lockers could expire the entry: {at:?}"
    );
    assert!(
        !left.iter().any(|h| *h),
        "unlock() returned LockLost and the lost lock's entry stayed on a locker that answers: \
         {left:?}"
    );
}

/// Reproduces a past break: a lost lock whose loss a refresh lane declared on a runtime that then ended kept its entry on a locker that answers after its guard was dropped, and `finish_releases` said every release was done.
#[test]
fn finish_releases_waits_for_a_lost_lock_declared_on_a_runtime_gone_since() {
    let lost = lost_on_x(
        3627,
        Duration::from_secs(6),
        Slow::No,
        Duration::from_millis(400),
    );
    let Lost {
        cluster,
        ds,
        guard,
        x,
        ..
    } = lost;
    x.shutdown_timeout(Duration::from_secs(1));
    let shut = Instant::now();
    let uid = guard.uid().to_owned();
    drop(guard);
    let finished = common::runtime().block_on(ds.finish_releases(Duration::from_secs(2)));
    let left = holding(cluster.lockers(), &uid);
    let at = shut.elapsed();
    eprintln!(
        "{at:?} after the acquiring runtime ended: finish_releases {finished:?}, lockers \
         holding the uid: {left:?}"
    );
    assert!(
        at < Duration::from_millis(4500),
        "checked before the lockers could expire the entry: {at:?}"
    );
    if finished.is_ok() {
        assert!(
            !left.iter().any(|h| *h),
            "finish_releases returned Ok with the guard dropped and the lost lock's entry still \
             on a locker that answers: {left:?}"
        );
    }
}

/// Reproduces a past break: a lost lock whose loss a refresh lane declared on a runtime that is no longer driven kept its entry on a locker that answers after its holder unlocked on a plain thread (the lane's clean-up, neither run nor dropped, never queued its owed unlocks).
#[test]
fn a_lost_lock_declared_on_a_runtime_idle_since_is_freed_once_its_holder_unlocks() {
    let lost = lost_on_x(
        36_281,
        Duration::from_secs(6),
        Slow::No,
        Duration::from_millis(200),
    );
    let Lost {
        cluster,
        guard,
        x,
        seen,
        ..
    } = lost;
    let uid = guard.uid().to_owned();
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [false, false, true],
        "locker 2 still holds the lost lock's entry before the unlock"
    );
    let unlocked = block_on(guard.unlock());
    assert!(
        matches!(unlocked, Err(Error::LockLost)),
        "unlock says the lock was lost: {unlocked:?}"
    );
    let left = wait_until_freed(&cluster, &uid, Duration::from_millis(1000));
    let at = seen.elapsed();
    eprintln!(
        "{at:?} after the loss, with the declaring runtime idle: lockers holding the uid {left:?}"
    );
    assert!(
        at < Duration::from_millis(4500),
        "checked before the lockers could expire the entry: {at:?}"
    );
    assert!(
        !left.iter().any(|h| *h),
        "unlock() returned LockLost and, a second later, the lost lock's entry is still on a \
         locker that answers, held up by the idle runtime that declared the loss: {left:?}"
    );
    drop(x);
}

/// Reproduces a past break: with the runtime that declared a loss left idle, `finish_releases` on another runtime, every guard dropped and every locker answering, waited out its bound and failed with `ReleasesPending`, the lost lock's entry still on a locker.
#[test]
fn finish_releases_frees_a_lost_lock_declared_on_a_runtime_idle_since() {
    let lost = lost_on_x(
        36_281,
        Duration::from_secs(6),
        Slow::No,
        Duration::from_millis(200),
    );
    let Lost {
        cluster,
        ds,
        guard,
        x,
        seen,
    } = lost;
    let uid = guard.uid().to_owned();
    drop(guard);
    let finished = common::runtime().block_on(ds.finish_releases(Duration::from_millis(1000)));
    let left = holding(cluster.lockers(), &uid);
    let at = seen.elapsed();
    eprintln!(
        "{at:?} after the loss, with the declaring runtime idle: finish_releases {finished:?}, \
         lockers holding the uid {left:?}"
    );
    assert!(
        at < Duration::from_millis(4500),
        "checked before the lockers could expire the entry: {at:?}"
    );
    assert!(
        finished.is_ok() && !left.iter().any(|h| *h),
        "every guard dropped and every locker answering, yet finish_releases gave {finished:?} \
         with the lost lock's entry still on {left:?}: the idle runtime that declared the loss \
         held it up"
    );
    drop(x);
}

/// Reproduces a past break: a lost lock whose clean-up had begun on the declaring runtime, and stalled there with a force-unlock still on its way when that runtime went idle, kept its entry on a locker that answers after its holder let go (the clean-up was claimed, so `unlock()` only kicked empty retry queues).
///
/// Reproduces a past break too: once the holder's own clean-up had freed
/// every entry, the clean-up stalled on the idle runtime stayed counted
/// among the outstanding releases for good, and `finish_releases` on
/// another runtime waited out its bound and failed with `ReleasesPending`
/// (`Dsync::finish_releases` fails so only "when releases are still
/// running at the bound").
#[test]
fn a_lost_lock_whose_clean_up_stalled_on_an_idle_runtime_is_freed_once_its_holder_lets_go() {
    // Past the margin: the clean-up has begun, its force-unlock to locker
    // 2 on its way (delivered 1 s late, from X: it lands only while X is
    // driven).
    let lost = lost_on_x(
        36_345,
        Duration::from_secs(6),
        Slow::First(Duration::from_secs(1)),
        Duration::from_millis(2300),
    );
    let Lost {
        cluster,
        ds,
        guard,
        x,
        seen,
    } = lost;
    let uid = guard.uid().to_owned();
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [false, false, true],
        "locker 2 still holds the entry; the force-unlock to it is on its way"
    );
    // X is kept but no longer driven: idle, not gone.
    let unlocked = block_on(guard.unlock());
    assert!(
        matches!(unlocked, Err(Error::LockLost)),
        "unlock says the lock was lost: {unlocked:?}"
    );
    let left = wait_until_freed(&cluster, &uid, Duration::from_millis(2000));
    let at = seen.elapsed();
    eprintln!("{at:?} after the loss, the holder let go; lockers holding the uid {left:?}");
    assert!(
        at < Duration::from_millis(5500),
        "checked before locker 2 could expire the entry: {at:?}"
    );
    assert!(
        !left.iter().any(|h| *h),
        "unlock() returned LockLost and, two seconds later (the stalled force-unlock would \
         have landed after one on a driven runtime), the lost lock's entry is still on locker \
         2, which answers: the clean-up that claimed it stalled on the idle runtime: {left:?}"
    );
    let (finished, _) =
        common::finish_elsewhere(&ds, cluster.lockers(), &uid, Duration::from_secs(2));
    assert!(
        finished.is_ok(),
        "every entry is gone and every locker answers, yet finish_releases(2 s) returns \
         {finished:?}: the clean-up stalled on the idle runtime still counts as running"
    );
    drop(x);
}

/// Reproduces a past break: a lost lock whose guard was dropped on a runtime that then shut down kept its entry on a locker that answers until it expired (the drop claimed the clean-up and spawned it on that runtime, where the shutdown dropped it unrun, owing nothing), and `finish_releases` said every release was done.
#[test]
fn a_lost_lock_dropped_on_a_runtime_shutting_down_leaves_no_entry_behind() {
    let lost = lost_on_x(36_292, Duration::from_secs(6), Slow::No, Duration::ZERO);
    let Lost {
        cluster,
        ds,
        guard,
        x,
        ..
    } = lost;
    let uid = guard.uid().to_owned();
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [false, false, true],
        "locker 2 still holds the lost lock's entry"
    );
    // The holder lets go on X; X ends right after.
    x.block_on(async move { drop(guard) });
    x.shutdown_timeout(Duration::from_secs(1));
    let shut = Instant::now();
    let finished = common::runtime().block_on(ds.finish_releases(Duration::from_secs(2)));
    let left = wait_until_freed(
        &cluster,
        &uid,
        Duration::from_secs(3).saturating_sub(shut.elapsed()),
    );
    let at = shut.elapsed();
    eprintln!(
        "{at:?} after the runtime ended: finish_releases {finished:?}, lockers holding the uid \
         {left:?}"
    );
    assert!(
        at < Duration::from_millis(4500),
        "checked before the lockers could expire the entry: {at:?}"
    );
    assert!(
        !left.iter().any(|h| *h),
        "the holder dropped its lost guard and, {at:?} later, a locker that answers still holds \
         the entry: {left:?} (finish_releases gave {finished:?})"
    );
}

/// Reproduces a past break: a lost lock's force-unlock, begun once the safety margin passed and cut short by its runtime's shutdown, queued nothing (its owed clean-up was already settled), so a locker that answers kept the entry after the holder let go, and `finish_releases` said every release was done.
#[test]
fn a_lost_locks_clean_up_cut_short_by_its_runtime_shutting_down_leaves_no_entry_behind() {
    let validity = Duration::from_secs(10);
    let slow = Arc::new(AtomicBool::new(false));
    // Past the 2 s margin: the clean-up is sent; locker 2's is 5 s late.
    let lost = lost_on_x(
        36_293,
        validity,
        Slow::WhileSet(Duration::from_secs(5), slow.clone()),
        Duration::from_millis(2500),
    );
    let Lost {
        cluster,
        ds,
        guard,
        x,
        seen,
    } = lost;
    let uid = guard.uid().to_owned();
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [false, false, true],
        "locker 2's force-unlock is still on its way"
    );
    x.shutdown_timeout(Duration::from_secs(1));
    slow.store(false, Ordering::SeqCst);
    // The holder lets go: "they go at once".
    drop(guard);
    let finished = common::runtime().block_on(ds.finish_releases(Duration::from_secs(2)));
    let left = wait_until_freed(&cluster, &uid, Duration::from_secs(2));
    let at = seen.elapsed();
    eprintln!(
        "{at:?} after the loss: finish_releases {finished:?}, lockers holding the uid {left:?}"
    );
    assert!(
        at < Duration::from_secs(9),
        "checked before locker 2 could expire the entry (10 s validity): {at:?}"
    );
    assert!(
        !left.iter().any(|h| *h),
        "the lost lock's clean-up was cut short by its runtime's shutdown and the holder let go, \
         yet {at:?} after the loss a locker that answers still holds the entry: {left:?} \
         (finish_releases gave {finished:?})"
    );
}

/// Reproduces a past break: a lost lock's guard dropped on the runtime that declared the loss, as its `block_on` returns, leaves the entry on the locker still holding it: the clean-up the drop claims is spawned on that runtime, no longer driven, and `finish_releases` on another runtime waits out its bound.
///
/// docs/guarantees.md, "Any runtime": "One thing waits for a runtime that
/// is no longer driven: the safety margin of a lost lock whose loss was
/// declared there, while its holder still holds the guard. The entries then
/// go when the holder lets go (on whatever runtime, or none), or expire",
/// and "A release a runtime began and then stopped driving (a guard dropped
/// as its `block_on` returns, ...) is recorded on the lockers' queues as
/// on its way; once overdue ..., any other drain task or `finish_releases`
/// sends it again". "A lost lock is freed once its holder lets go": "As
/// soon as the holder drops its guard ... they go at once". The guard's
/// drop claims the clean-up (`clean_up_after_holder`) and spawns it on the
/// current runtime, counted as outstanding and recorded on no queue.
///
/// The scene (real clock, as the runtime must stop being driven): "x" is
/// taken on runtime X (validity 6 s, margin 2 s, a refresh every 100 ms);
/// lockers 0 and 1 are forced open by name, X's lane declares the loss,
/// and the guard is dropped as X's `block_on` returns; X is kept, never
/// driven again. Locker 2, answering all along, still holds the entry (it
/// expires only 6 s after the last refresh). On another runtime
/// `finish_releases(1.5 s)` should free it.
#[test]
fn finish_releases_frees_a_lost_lock_whose_guard_was_dropped_as_the_declaring_runtimes_block_on_returned(
) {
    let Lost {
        cluster,
        ds,
        guard,
        x,
        seen,
    } = lost_on_x(47_004, Duration::from_secs(6), Slow::No, Duration::ZERO);
    let uid = guard.uid().to_owned();
    // The holder lets go as X's `block_on` returns; X is not driven again.
    x.block_on(async move { drop(guard) });
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [false, false, true],
        "locker 2 still holds the lost lock's entry"
    );
    let (finished, left) =
        common::finish_elsewhere(&ds, cluster.lockers(), &uid, Duration::from_millis(1500));
    let at = seen.elapsed();
    assert!(
        at < Duration::from_millis(4500),
        "checked before the lockers could expire the entry: {at:?}"
    );
    assert!(
        finished.is_ok() && !left.iter().any(|h| *h),
        "the holder let go of the lost lock and every locker answers, yet finish_releases gave \
         {finished:?} with its entry still on {left:?}: the clean-up the drop claimed sits on \
         the idle runtime"
    );
    drop(x);
}

/// How the link to locker 2 delivers force-unlocks (the scene's own go
/// straight to the lockers; these are the clean-up's).
enum Slow {
    No,
    /// The first one this late; the rest at once.
    First(Duration),
    /// This late while the flag is set (it is set once lockers 0 and 1
    /// are forced open).
    WhileSet(Duration, Arc<AtomicBool>),
}

struct Lost {
    cluster: TestCluster,
    ds: Dsync,
    guard: WriteGuard,
    /// The runtime that took the lock and declared its loss; not driven
    /// since.
    x: tokio::runtime::Runtime,
    /// When the guard was seen lost.
    seen: Instant,
}

/// Takes "x" on runtime X (lockers and lease with `validity`, a 2 s
/// margin and a refresh every 100 ms), forces lockers 0 and 1 open by
/// name, waits for X's lane to declare the loss, and drives X `then_for`
/// longer.
fn lost_on_x(seed: u64, validity: Duration, slow: Slow, then_for: Duration) -> Lost {
    eprintln!("seed {seed}");
    let cluster = TestCluster::with_config(
        3,
        seed,
        LockerConfig {
            validity,
            ..LockerConfig::default()
        },
    );
    let first_done = Arc::new(AtomicBool::new(false));
    let (delay, flag) = match slow {
        Slow::No => (Duration::ZERO, None),
        Slow::First(delay) => (delay, None),
        Slow::WhileSet(delay, flag) => (delay, Some(flag)),
    };
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            if i != 2 || delay.is_zero() {
                return l;
            }
            let (first_done, flag) = (first_done.clone(), flag.clone());
            Arc::new(Relay::new(l, move |kind, _| {
                let late = kind == CallKind::ForceUnlock
                    && match &flag {
                        Some(flag) => flag.load(Ordering::SeqCst),
                        None => !first_done.swap(true, Ordering::SeqCst),
                    };
                if late {
                    Route::Late(delay)
                } else {
                    Route::Forward
                }
            })) as Arc<dyn NetLocker>
        })
        .collect();
    let ds = Dsync::builder(lockers)
        .owner("a")
        .rng_seed(seed)
        .lease(Lease {
            validity,
            safety_margin: Duration::from_secs(2),
            refresh_interval: Duration::from_millis(100),
        })
        .build()
        .expect("valid coordinator");
    let x = common::runtime();
    let (guard, seen) = x.block_on(async {
        let guard = common::try_lock_x(&ds).await;
        let forced = LockArgs {
            uid: "".into(),
            resources: vec!["x".to_string()].into(),
            owner: "admin".into(),
            source: "test".into(),
            quorum: 1,
        };
        for locker in &cluster.lockers()[..2] {
            let forced = NetLocker::force_unlock(&**locker, &forced)
                .await
                .expect("a local force-unlock");
            assert!(forced, "the entry was forced open");
        }
        if let Some(flag) = &flag {
            flag.store(true, Ordering::SeqCst);
        }
        // The lane's next refreshes find the lock gone on two of three.
        tokio::time::timeout(Duration::from_secs(2), guard.lost())
            .await
            .expect("the loss is declared within a few refreshes");
        let seen = Instant::now();
        if !then_for.is_zero() {
            tokio::time::sleep(then_for).await;
        }
        (guard, seen)
    });
    assert!(guard.is_lost(), "the lane declared the loss");
    Lost {
        cluster,
        ds,
        guard,
        x,
        seen,
    }
}

/// Polls (at most `bound`, every 20 ms) until no locker holds `uid`;
/// returns what the lockers hold at the end.
fn wait_until_freed(cluster: &TestCluster, uid: &str, bound: Duration) -> Vec<bool> {
    let start = Instant::now();
    loop {
        let left = holding(cluster.lockers(), uid);
        if !left.iter().any(|h| *h) || start.elapsed() >= bound {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
