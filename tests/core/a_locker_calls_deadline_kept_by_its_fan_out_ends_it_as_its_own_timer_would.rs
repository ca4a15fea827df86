//! A locker call that waits for its answer arms no timer of its own: the
//! fan-out polling it (a round, a wait, a release) wakes it at its
//! deadline with one timer (src/quorum/deadline.rs). These scenes check
//! that a call still ends as `tokio::time::timeout_at` would end it:
//! under the task's cooperative budget, on the runtime that first polled
//! it when it outlives its fan-out, and through nested fan-outs.
#![cfg(feature = "testing")]

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorum_lock::{Dsync, Error, LocalLocker, LockArgs, NetLocker, Timeouts};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// A locker whose lock and rlock calls run `behaviour`; the rest go to a
/// `LocalLocker`.
struct Scripted<F> {
    inner: LocalLocker,
    behaviour: F,
}

#[async_trait::async_trait]
impl<F, Fut> NetLocker for Scripted<F>
where
    F: Fn() -> Fut + Send + Sync,
    Fut: Future<Output = ()> + Send,
{
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        (self.behaviour)().await;
        self.inner.lock(args).await
    }
    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        (self.behaviour)().await;
        self.inner.rlock(args).await
    }
    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.unlock(args).await
    }
    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.runlock(args).await
    }
    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.refresh(args).await
    }
    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.force_unlock(args).await
    }
    fn endpoint(&self) -> String {
        "scripted".into()
    }
    fn is_online(&self) -> bool {
        true
    }
    fn is_local(&self) -> bool {
        true
    }
}

fn scripted<F, Fut>(behaviour: F) -> Arc<dyn NetLocker>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    Arc::new(Scripted {
        inner: LocalLocker::new(),
        behaviour,
    })
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

/// Reproduces a past break (found by review, never released): a call
/// that had left its deadline to its fan-out made its first timer on the
/// runtime it was handed to, which panicked there without timers.
///
/// A lock future polled once on a runtime (its calls pending, having
/// asked the round for their deadlines) and dropped on another runtime
/// built without timers: its calls are handed to that runtime, and keep
/// the timer they made on the runtime that polled them first.
#[test]
fn a_lock_future_dropped_on_a_runtime_without_timers_does_not_panic() {
    static PANICS: AtomicUsize = AtomicUsize::new(0);
    static SITES: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let previous: Arc<dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync> =
        Arc::from(std::panic::take_hook());
    let chained = previous.clone();
    // Only panics of the calls' deadlines, on this thread, where the
    // runtime without timers runs its tasks (other tests of this program
    // run beside it). Left as it was: the task that watches the lock's
    // stragglers (src/lock/release.rs) makes a timer on that runtime too,
    // and panics there.
    let here = std::thread::current().id();
    std::panic::set_hook(Box::new(move |info| {
        if let Some(at) = info.location().filter(|at| {
            at.file() == "src/quorum/deadline.rs" && std::thread::current().id() == here
        }) {
            PANICS.fetch_add(1, Ordering::SeqCst);
            SITES
                .lock()
                .unwrap()
                .push(format!("{}:{}", at.file(), at.line()));
        }
        chained(info);
    }));
    let a = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let hang = || scripted(std::future::pending::<()>);
    let dsync = a.block_on(async {
        Dsync::builder(vec![hang(), hang(), hang()])
            .timeouts(Timeouts {
                acquire: ACQUIRE,
                ..Timeouts::default()
            })
            .build()
            .unwrap()
    });
    let mutex = dsync.rw_mutex(["handed-off"]).unwrap();
    let mut fut = Box::pin(mutex.lock());
    a.block_on(async { assert!(futures::poll!(fut.as_mut()).is_pending()) });
    let b = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    b.block_on(async move {
        drop(fut);
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    });
    drop(b);
    drop(std::panic::take_hook());
    std::panic::set_hook(Box::new(move |info| previous(info)));
    let sites = SITES.lock().unwrap().clone();
    assert_eq!(
        PANICS.load(Ordering::SeqCst),
        0,
        "tasks panicked at {sites:?}"
    );
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
        tokio::time::timeout(
            Duration::from_secs(60),
            inner.finish_releases(Duration::from_secs(30)),
        )
        .await
        .expect("inner stragglers never ended")
        .unwrap();
        tokio::time::timeout(
            Duration::from_secs(60),
            outer.finish_releases(Duration::from_secs(30)),
        )
        .await
        .expect("outer stragglers never ended")
        .unwrap();
    }
}
