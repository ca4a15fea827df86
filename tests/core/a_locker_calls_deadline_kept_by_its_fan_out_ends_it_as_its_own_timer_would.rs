//! A locker call that waits for its answer arms no timer of its own: the
//! fan-out polling it (a round, a wait, a release) wakes it at its
//! deadline with one timer (src/quorum/deadline.rs). These scenes check
//! that a call still ends as `tokio::time::timeout_at` would end it:
//! under the task's cooperative budget, when it outlives its fan-out
//! (dropped on another runtime, its own gone or idle), and through nested
//! fan-outs.
#![cfg(feature = "testing")]

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorum_lock::testing::DriftClock;
use quorum_lock::{Dsync, LocalLocker, NetLocker, Timeouts};

use crate::common::hooked::{Call, Hooked, Script};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// A locker whose lock calls (`lock`, `rlock`, `lock_wait`) run
/// `behaviour` first; the rest go straight to a `LocalLocker`.
fn scripted<F, Fut>(behaviour: F) -> Arc<dyn NetLocker>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    Hooked::new(Arc::new(LocalLocker::new()))
        .named("scripted")
        .local(true)
        .awaiting_first(move |call, _| {
            matches!(call, Call::Lock | Call::RLock | Call::LockWait)
                .then(|| Box::pin(behaviour()) as Script)
        })
        .shared()
}

const ACQUIRE: Duration = Duration::from_millis(500);

/// Reproduces a past break (found by review, never released): a call
/// whose deadline had passed was declared timed out in a poll whose
/// budget another call had spent, its answer, ready in time, not looked at
/// again.
///
/// Two lockers answer "granted" exactly as the round's deadline comes;
/// a third, polled first, uses up tokio's coop budget in that same poll
/// (it drains a queue of 300 messages, as a locker reading a burst of
/// replies would). Before the change the grants are taken
/// (`tokio::time::timeout_at` polls its timer under the budget too, so the
/// round looks again once the budget is back, and the answers win), as
/// they must be with the fan-out keeping the deadlines.
#[tokio::test(start_paused = true)]
async fn answers_ready_at_the_deadline_are_not_lost_to_a_spent_coop_budget() {
    let start = Instant::now();
    let at = start + ACQUIRE;
    let (tx, rx) = mpsc::unbounded_channel::<u32>();
    for i in 0..300 {
        tx.send(i).unwrap();
    }
    let rx = Arc::new(Mutex::new(Some(rx)));
    let burner = scripted(move || {
        let rx = rx.clone();
        async move {
            tokio::time::sleep_until(at).await;
            let taken = rx.lock().unwrap().take();
            if let Some(mut rx) = taken {
                while rx.recv().await.is_some() {}
            }
            std::future::pending::<()>().await;
        }
    });
    let punctual = || scripted(move || tokio::time::sleep_until(at));
    let dsync = Dsync::builder(vec![burner, punctual(), punctual()])
        .timeouts(Timeouts {
            acquire: ACQUIRE,
            ..Timeouts::default()
        })
        .build()
        .unwrap();
    let mutex = dsync.rw_mutex(["budget"]).unwrap();
    let out = mutex.try_lock().await;
    assert!(
        out.is_ok(),
        "two grants ready at the deadline were lost: {:?} after {:?}",
        out.err(),
        start.elapsed()
    );
    drop(tx);
}

/// Panics counted while `scene` runs: on this thread, and on the
/// coordinators' own background runtimes, where calls handed on from
/// another runtime run. Other tests of this program run beside it, on
/// other threads; the background thread is shared with them, so a panic
/// there counts only when [`raised_by_this_scene`] says it came from the
/// library or from this file's lockers (another test's relay, whose own
/// timer panics on that thread by design, was once counted here).
fn panics_during(scene: impl FnOnce()) -> Vec<String> {
    static SITES: Mutex<Vec<String>> = Mutex::new(Vec::new());
    static SERIAL: Mutex<()> = Mutex::new(());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    SITES.lock().unwrap().clear();
    let previous: Arc<dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync> =
        Arc::from(std::panic::take_hook());
    let chained = previous.clone();
    let here = std::thread::current().id();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        let background = thread.name() == Some("quorum-lock-background");
        if thread.id() == here
            || (background
                && raised_by_this_scene(&std::backtrace::Backtrace::force_capture().to_string()))
        {
            let at = info
                .location()
                .map_or_else(String::new, |at| format!("{}:{}", at.file(), at.line()));
            SITES.lock().unwrap().push(format!("{at}: {info}"));
        }
        chained(info);
    }));
    scene();
    drop(std::panic::take_hook());
    std::panic::set_hook(Box::new(move |info| previous(info)));
    SITES.lock().unwrap().clone()
}

/// Whether a panic whose backtrace is `trace` was raised by the library or
/// by this file's lockers: the innermost frame of this workspace below the
/// panic machinery is in the library outside its test helpers
/// (`src/testing/`) or in this file. A trace naming no frame of the
/// workspace counts too: an unknown source is not passed over.
fn raised_by_this_scene(trace: &str) -> bool {
    let mut lines = trace.lines();
    // Frames up to the panic entry point are the hook and std's machinery.
    if !lines.any(|line| line.contains("rust_begin_unwind")) {
        return true;
    }
    let innermost = lines.find_map(|line| line.trim_start().strip_prefix("at ./"));
    match innermost {
        None => true,
        Some(at) => {
            (at.starts_with("src/") && !at.starts_with("src/testing/")) || at.starts_with(file!())
        }
    }
}

/// How many calls of a [`cluster_waiting_on`] ended, and how many of them
/// were dropped by a panic unwinding.
#[derive(Clone, Default)]
struct Ends {
    ended: Arc<AtomicUsize>,
    unwound: Arc<AtomicUsize>,
}

impl std::ops::Deref for Ends {
    type Target = AtomicUsize;
    fn deref(&self) -> &AtomicUsize {
        &self.ended
    }
}

/// A coordinator on three lockers whose lock calls never answer, built on
/// `runtime`, on a `DriftClock` if `drift`; locker `i`'s calls first await
/// `wait(i)`, if any (a timer of their own, say). Their ends are counted:
/// a call gives up its locker's future at its deadline.
fn cluster_waiting_on(
    runtime: &tokio::runtime::Runtime,
    drift: bool,
    wait: impl Fn(usize) -> Option<tokio::time::Sleep> + Send + Sync + Clone + 'static,
) -> (Dsync, Ends) {
    struct Ended(Ends);
    impl Drop for Ended {
        fn drop(&mut self) {
            if std::thread::panicking() {
                self.0.unwound.fetch_add(1, Ordering::SeqCst);
            }
            self.0.ended.fetch_add(1, Ordering::SeqCst);
        }
    }
    let ends = Ends::default();
    let silent = |i: usize| {
        let (ends, wait) = (ends.clone(), wait.clone());
        scripted(move || {
            let ended = Ended(ends.clone());
            let waiting = wait(i);
            async move {
                let _ended = ended;
                if let Some(waiting) = waiting {
                    waiting.await;
                }
                std::future::pending::<()>().await
            }
        })
    };
    let dsync = runtime.block_on(async {
        let mut builder =
            Dsync::builder(vec![silent(0), silent(1), silent(2)]).timeouts(Timeouts {
                acquire: ACQUIRE,
                ..Timeouts::default()
            });
        if drift {
            builder = builder.clock(DriftClock::new());
        }
        builder.build().unwrap()
    });
    (dsync, ends)
}

fn current_thread(timers: bool) -> tokio::runtime::Runtime {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    if timers {
        builder.enable_all();
    }
    builder.build().unwrap()
}

/// What becomes of the runtime that first polled a lock future before
/// the future is dropped on another.
#[derive(Clone, Copy, Debug)]
enum Then {
    /// It shuts down; the other runtime has timers.
    ShutDown,
    /// It stays, idle (its `block_on` returned); the other has timers.
    Idle,
    /// It stays; the other runtime has no timers.
    OtherWithoutTimers,
}

/// A lock future on [`cluster_waiting_on`]`(drift, wait)` polled once on a
/// runtime (its three calls pending), then `then`, and the future dropped
/// on another runtime; waits (real time, 10 s at most) for its calls to
/// end. Returns how they ended, and the panics seen meanwhile.
fn hand_off_a_lock_future(
    then: Then,
    drift: bool,
    wait: impl Fn(usize) -> Option<tokio::time::Sleep> + Send + Sync + Clone + 'static,
) -> (Ends, Vec<String>) {
    let mut ends = Ends::default();
    let sites = panics_during(|| {
        let a = current_thread(true);
        let (dsync, ended) = cluster_waiting_on(&a, drift, wait);
        ends = ended.clone();
        let mutex = dsync.rw_mutex(["handed-off"]).unwrap();
        let mut fut = Box::pin(mutex.lock());
        a.block_on(async { assert!(futures::poll!(fut.as_mut()).is_pending()) });
        let a = match then {
            Then::ShutDown => {
                drop(a);
                None
            }
            Then::Idle | Then::OtherWithoutTimers => Some(a),
        };
        let timers = !matches!(then, Then::OtherWithoutTimers);
        let b = current_thread(timers);
        let give_up = std::time::Instant::now() + Duration::from_secs(10);
        let ended_all = || ended.load(Ordering::SeqCst) >= 3;
        b.block_on(async {
            drop(fut);
            // Driven while it waits, where it can wait: calls handed to it
            // run.
            while timers && !ended_all() && std::time::Instant::now() < give_up {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            for _ in 0..50 {
                tokio::task::yield_now().await;
            }
        });
        while !ended_all() && std::time::Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(b);
        drop(a);
    });
    (ends, sites)
}

/// Reproduces a past break (found by review, never released): a call
/// that had left its deadline to its fan-out made its first timer on the
/// runtime it was handed to, which panicked there without timers.
#[test]
fn a_lock_future_dropped_on_a_runtime_without_timers_does_not_panic() {
    let (ends, sites) = hand_off_a_lock_future(Then::OtherWithoutTimers, false, |_| None);
    assert_eq!(ends.load(Ordering::SeqCst), 3, "calls never ended");
    assert!(sites.is_empty(), "panicked: {sites:#?}");
}

/// Reproduces past breaks (found by review): a call handed on from a
/// runtime that had since shut down polled the timer it had made there,
/// and its task panicked ("A Tokio 1.x context was found, but it is being
/// shutdown"); from a runtime left idle (its `block_on` returned, the
/// runtime kept), that timer sat in a wheel nothing drives, and the call
/// never ended. Also on a drifting clock (tests), whose timers were made
/// the same way.
#[test]
fn calls_of_a_lock_future_end_by_their_deadline_whatever_became_of_their_runtime() {
    for drift in [false, true] {
        for then in [Then::ShutDown, Then::Idle] {
            let (ends, sites) = hand_off_a_lock_future(then, drift, |_| None);
            let context = format!("{then:?}, drifting clock: {drift}");
            assert_eq!(
                ends.load(Ordering::SeqCst),
                3,
                "{context}: calls never ended"
            );
            assert!(sites.is_empty(), "{context}: panicked: {sites:#?}");
        }
    }
}

/// A locker whose call waits on a tokio timer of its own (an internal
/// timeout or backoff), made on a runtime since shut down: polled
/// elsewhere, that timer panics, which no library can prevent. The
/// panicking call is dropped (its unlock queued), and the others still run
/// to their deadline (found by review: one such panic dropped them all).
#[test]
fn a_locker_timer_of_a_runtime_since_shut_down_ends_only_its_own_call() {
    let (ends, sites) = hand_off_a_lock_future(Then::ShutDown, false, |i| {
        (i == 0).then(|| tokio::time::sleep(Duration::from_secs(3600)))
    });
    assert_eq!(ends.load(Ordering::SeqCst), 3, "calls never ended");
    let unwound = ends.unwound.load(Ordering::SeqCst);
    assert_eq!(
        unwound, 1,
        "calls dropped by the panic (panics: {sites:#?})"
    );
    // Only the locker's own timer, never the library's.
    let ours: Vec<&String> = sites.iter().filter(|s| s.starts_with("src/")).collect();
    assert!(ours.is_empty(), "the library panicked: {ours:#?}");
}

/// Nested fan-outs: each outer locker's lock call is a try-lock on an
/// inner `Dsync` whose lockers never answer, awaited directly, inside a
/// `FuturesUnordered`, or inside `select!` beside a timer of its own.
/// Whatever the inner round's deadline, the outer try-lock ends by the
/// earlier of the two deadlines, and the inner stragglers end too.
#[tokio::test(start_paused = true)]
async fn nested_fan_outs_end_by_the_earlier_deadline() {
    use futures::stream::{FuturesUnordered, StreamExt};
    for (inner_ms, how) in [
        (300u64, 0u8),
        (2_000, 0),
        (300, 1),
        (2_000, 1),
        (300, 2),
        (2_000, 2),
    ] {
        let hang = || scripted(std::future::pending::<()>);
        let inner = Dsync::builder(vec![hang(), hang(), hang()])
            .timeouts(Timeouts {
                acquire: Duration::from_millis(inner_ms),
                ..Timeouts::default()
            })
            .build()
            .unwrap();
        let nested = |inner: Dsync| {
            scripted(move || {
                let inner = inner.clone();
                async move {
                    let mutex = inner.rw_mutex(["inner"]).unwrap();
                    match how {
                        0 => {
                            let _ = mutex.try_lock().await;
                        }
                        1 => {
                            let mut set = FuturesUnordered::new();
                            set.push(mutex.try_lock());
                            let _ = set.next().await;
                        }
                        _ => {
                            tokio::select! {
                                _ = mutex.try_lock() => {}
                                _ = tokio::time::sleep(Duration::from_secs(3600)) => {}
                            }
                        }
                    }
                    // The inner lock failed: never answer.
                    std::future::pending::<()>().await
                }
            })
        };
        let outer = Dsync::builder(vec![
            nested(inner.clone()),
            nested(inner.clone()),
            nested(inner.clone()),
        ])
        .timeouts(Timeouts {
            acquire: ACQUIRE,
            ..Timeouts::default()
        })
        .build()
        .unwrap();
        let start = Instant::now();
        let out = tokio::time::timeout(
            Duration::from_secs(60),
            outer.rw_mutex(["outer"]).unwrap().try_lock(),
        )
        .await
        .expect("the outer try-lock never ended");
        assert!(out.is_err());
        let took = start.elapsed();
        let bound = ACQUIRE
            .max(Duration::from_millis(inner_ms))
            .min(Duration::from_secs(4000));
        assert!(
            took <= ACQUIRE,
            "inner {inner_ms} ms, how {how}: the outer try-lock took {took:?} (bound {bound:?})"
        );
        for (which, dsync) in [("inner", &inner), ("outer", &outer)] {
            tokio::time::timeout(
                Duration::from_secs(60),
                dsync.finish_releases(Duration::from_secs(30)),
            )
            .await
            .unwrap_or_else(|_| panic!("{which} stragglers never ended"))
            .unwrap();
        }
    }
}
