//! Reentrant locks through a `Holder`: a nested acquisition is
//! granted at once and calls no locker, every nested guard is the same lock
//! (uid, fencing token, loss), two holders exclude each other, the last
//! release frees the lockers whatever the order, an upgrade is refused at
//! once, and clones racing for a lock make one acquisition.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use quorum_lock::{Dsync, Error, LocalLocker, LockMode, NetLocker, ReentrantGuard};
use tokio::time::{sleep, Instant};

use crate::common;
use crate::common::hooked::{Call, Hooked, Optional};
use crate::common::{holders_of, leftovers, nodes};

/// The calls a lock made of one locker: grants asked for, releases and
/// fencing tokens drawn (refreshes, which the keeper sends on its own
/// schedule, are not counted).
#[derive(Default)]
struct Counting {
    acquires: AtomicUsize,
    releases: AtomicUsize,
    fences: AtomicUsize,
}

/// Forwards to `node` and counts the calls a lock makes in `counting`.
/// Asks for grants after `delay`, so that a first acquisition can be kept
/// in flight.
fn counted(
    node: &Arc<LocalLocker>,
    delay: Duration,
    counting: Arc<Counting>,
) -> Arc<dyn NetLocker> {
    Hooked::new(node.clone())
        .arriving_late(move |call, _| {
            let counter = match call {
                Call::Lock | Call::RLock | Call::LockWait => &counting.acquires,
                Call::Unlock | Call::RUnlock => &counting.releases,
                Call::Fence => &counting.fences,
                _ => return None,
            };
            counter.fetch_add(1, Ordering::SeqCst);
            let asking = matches!(call, Call::Lock | Call::RLock | Call::LockWait);
            (asking && !delay.is_zero()).then_some(delay)
        })
        .lacking(&[Optional::Proclaim, Optional::Leader])
        .named(format!("counting({})", node.endpoint()))
        .local(true)
        .shared()
}

struct Cluster {
    ds: Dsync,
    nodes: Vec<Arc<LocalLocker>>,
    counters: Vec<Arc<Counting>>,
}

impl Cluster {
    fn sum(&self, of: impl Fn(&Counting) -> &AtomicUsize) -> usize {
        self.counters
            .iter()
            .map(|c| of(c).load(Ordering::SeqCst))
            .sum()
    }

    fn acquires(&self) -> usize {
        self.sum(|c| &c.acquires)
    }

    /// Every counted call: grants asked for, releases, fencing tokens.
    fn calls(&self) -> usize {
        self.acquires() + self.sum(|c| &c.releases) + self.sum(|c| &c.fences)
    }
}

fn cluster(n: usize, delay: Duration) -> Cluster {
    let nodes = nodes(n);
    let counters: Vec<Arc<Counting>> = nodes.iter().map(|_| Arc::default()).collect();
    let lockers = nodes
        .iter()
        .zip(&counters)
        .map(|(node, counting)| counted(node, delay, counting.clone()))
        .collect();
    let ds = common::seeded(lockers, "reentrant-test", 24);
    Cluster {
        ds,
        nodes,
        counters,
    }
}

/// The result of an acquire that must finish in its first poll.
fn at_once(
    acquire: impl std::future::Future<Output = Result<ReentrantGuard, Error>>,
    what: &str,
) -> Result<ReentrantGuard, Error> {
    acquire
        .now_or_never()
        .unwrap_or_else(|| panic!("{what} did not finish at once"))
}

#[test]
fn holders_and_guards_go_anywhere() {
    fn movable<T: Send + Sync + 'static>() {}
    movable::<quorum_lock::Holder>();
    movable::<ReentrantGuard>();
}

#[tokio::test(start_paused = true)]
async fn nested_acquisition_never_waits_and_calls_no_locker() {
    let c = cluster(5, Duration::ZERO);
    let mutex = c.ds.rw_mutex(["orders/7"]).unwrap();
    let holder = c.ds.holder();
    let first = holder.lock(&mutex).await.unwrap();
    assert_eq!(c.acquires(), 5, "one call per locker for the first hold");
    let token = first.fencing_token().await.unwrap();
    let calls = c.calls();
    let start = Instant::now();

    // The same names, in another order and repeated, are the same lock.
    let same_names = c.ds.rw_mutex(["orders/7", "orders/7"]).unwrap();
    let clone = holder.clone();
    let nested = vec![
        at_once(holder.lock(&mutex), "lock").unwrap(),
        at_once(holder.read(&mutex), "read").unwrap(),
        at_once(holder.try_lock(&same_names), "try_lock").unwrap(),
        at_once(holder.try_read(&mutex), "try_read").unwrap(),
        at_once(clone.lock_timeout(&mutex, Duration::ZERO), "lock_timeout").unwrap(),
        at_once(
            clone.read_timeout(&same_names, Duration::ZERO),
            "read_timeout",
        )
        .unwrap(),
    ];
    for guard in &nested {
        assert_eq!(guard.uid(), first.uid());
        assert_eq!(guard.mode(), LockMode::Write);
        assert_eq!(guard.holds(), 7);
        assert_eq!(guard.fencing_token().await, Ok(token));
        assert!(!guard.is_lost());
    }
    assert_eq!(c.calls(), calls, "a nested hold made a locker call");
    assert_eq!(Instant::now(), start, "a nested hold waited");

    drop(nested);
    sleep(Duration::from_secs(1)).await;
    assert_eq!(
        c.calls(),
        calls,
        "giving up a nested hold made a locker call"
    );
    assert_eq!(holders_of(&c.nodes, first.uid()), 5);
    first.unlock().await.unwrap();
    sleep(Duration::from_secs(1)).await;
    assert!(leftovers(&c.nodes).is_empty());
}

/// A nested hold needs no runtime, not even in its timeout form: it waits
/// for nothing.
#[test]
fn a_nested_hold_needs_no_runtime() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let c = cluster(3, Duration::ZERO);
    let mutex = c.ds.rw_mutex(["outside"]).unwrap();
    let holder = c.ds.holder();
    let outer = runtime.block_on(holder.lock(&mutex)).unwrap();
    let inner =
        futures::executor::block_on(holder.read_timeout(&mutex, Duration::from_secs(1))).unwrap();
    assert_eq!(inner.uid(), outer.uid());
    drop(inner);
    runtime.block_on(outer.unlock()).unwrap();
    // A first acquisition does need one.
    let other = c.ds.holder();
    assert_eq!(
        futures::executor::block_on(other.lock_timeout(&mutex, Duration::from_secs(1))).err(),
        Some(Error::NoRuntime)
    );
}

#[tokio::test(start_paused = true)]
async fn two_holders_exclude_each_other() {
    let c = cluster(3, Duration::ZERO);
    let mutex = c.ds.rw_mutex(["reports"]).unwrap();
    let (a, b) = (c.ds.holder(), c.ds.holder());
    assert!(a.same_as(&a.clone()) && !a.same_as(&b));

    let held = a.lock(&mutex).await.unwrap();
    let uid = held.uid().to_owned();
    assert_eq!(b.try_lock(&mutex).await.err(), Some(Error::WouldBlock));
    assert_eq!(b.try_read(&mutex).await.err(), Some(Error::WouldBlock));
    assert_eq!(
        b.lock_timeout(&mutex, Duration::from_secs(2)).await.err(),
        Some(Error::Timeout)
    );
    // The plain mutex stays non-reentrant, and is excluded like anyone.
    assert_eq!(mutex.try_read().await.err(), Some(Error::WouldBlock));

    // `b` waits in line, and gets the lock when `a` lets go.
    let waiter = tokio::spawn({
        let (b, mutex) = (b.clone(), mutex.clone());
        async move { b.lock(&mutex).await }
    });
    sleep(Duration::from_secs(5)).await;
    assert!(!waiter.is_finished(), "b was granted while a held the lock");
    held.unlock().await.unwrap();
    let b_held = waiter.await.unwrap().unwrap();
    assert_ne!(b_held.uid(), uid);
    assert_eq!(a.try_read(&mutex).await.err(), Some(Error::WouldBlock));
    b_held.unlock().await.unwrap();

    // Readers of two holders share, as any readers do.
    let ra = a.read(&mutex).await.unwrap();
    let rb = b.try_read(&mutex).await.unwrap();
    assert_ne!(ra.uid(), rb.uid());
    drop((ra, rb));

    // A holder serves only the mutexes of its own Dsync.
    let elsewhere = cluster(1, Duration::ZERO);
    let foreign = elsewhere.ds.rw_mutex(["reports"]).unwrap();
    assert!(matches!(
        a.try_lock(&foreign).await,
        Err(Error::InvalidArgument(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn a_lost_lock_is_reported_to_every_nested_guard() {
    let c = cluster(3, Duration::ZERO);
    let mutex = c.ds.rw_mutex(["job"]).unwrap();
    let holder = c.ds.holder();
    let outer = holder.lock(&mutex).await.unwrap();
    let inner = holder.lock(&mutex).await.unwrap();
    let reader = holder.read(&mutex).await.unwrap();
    let tokens: Vec<_> = [&outer, &inner, &reader]
        .iter()
        .map(|g| g.loss_token())
        .collect();
    let lost = inner.lost();

    let start = Instant::now();
    assert_eq!(c.ds.force_unlock(["job"]).await.unwrap(), 3);
    lost.await;
    assert!(start.elapsed() <= Duration::from_secs(10));
    for guard in [&outer, &inner, &reader] {
        assert!(guard.is_lost());
        assert_eq!(guard.fencing_token().await, Err(Error::LockLost));
        tokio::time::timeout(Duration::from_millis(1), guard.lost())
            .await
            .expect("lost() fires for every guard");
    }
    assert!(tokens.iter().all(|t| t.is_cancelled()));

    // No guard that is lost from the start is handed out, and nothing is sent.
    let calls = c.calls();
    assert_eq!(holder.lock(&mutex).await.err(), Some(Error::LockLost));
    assert_eq!(holder.try_read(&mutex).await.err(), Some(Error::LockLost));
    assert_eq!(c.calls(), calls);

    // Every guard learns that its section was not protected to the end.
    assert_eq!(inner.unlock().await, Err(Error::LockLost));
    assert_eq!(reader.unlock().await, Err(Error::LockLost));
    assert_eq!(outer.unlock().await, Err(Error::LockLost));

    // With the lost hold gone, the next acquire is a fresh lock.
    let again = holder.try_lock(&mutex).await.unwrap();
    assert!(!again.is_lost());
    assert_eq!(again.holds(), 1);
    again.unlock().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_last_release_frees_the_lockers_in_any_order() {
    for fifo in [false, true] {
        for by_unlock in [false, true] {
            let case = format!(
                "{}, {}",
                if fifo {
                    "first in, first out"
                } else {
                    "first in, last out"
                },
                if by_unlock { "unlock()" } else { "drop" }
            );
            let c = cluster(5, Duration::ZERO);
            let mutex = c.ds.rw_mutex(["ledger"]).unwrap();
            let holder = c.ds.holder();
            let other = c.ds.holder();
            let mut guards: VecDeque<ReentrantGuard> = VecDeque::new();
            guards.push_back(holder.lock(&mutex).await.unwrap());
            guards.push_back(holder.read(&mutex).await.unwrap());
            guards.push_back(holder.lock(&mutex).await.unwrap());
            let uid = guards[0].uid().to_owned();

            while guards.len() > 1 {
                let next = if fifo {
                    guards.pop_front()
                } else {
                    guards.pop_back()
                };
                let guard = next.unwrap();
                if by_unlock {
                    assert_eq!(guard.unlock().await, Ok(()), "{case}");
                } else {
                    drop(guard);
                }
                sleep(Duration::from_secs(1)).await;
                assert_eq!(holders_of(&c.nodes, &uid), 5, "{case}: freed too early");
                assert_eq!(
                    other.try_read(&mutex).await.err(),
                    Some(Error::WouldBlock),
                    "{case}"
                );
            }
            let last = guards.pop_front().unwrap();
            assert_eq!(last.holds(), 1, "{case}");
            if by_unlock {
                assert_eq!(last.unlock().await, Ok(()), "{case}");
            } else {
                drop(last);
            }
            sleep(Duration::from_secs(1)).await;
            assert!(
                leftovers(&c.nodes).is_empty(),
                "{case}: {:?}",
                leftovers(&c.nodes)
            );
            other
                .try_lock(&mutex)
                .await
                .unwrap()
                .unlock()
                .await
                .unwrap();
        }
    }
}

#[tokio::test(start_paused = true)]
async fn an_upgrade_is_refused_at_once_and_a_read_under_write_calls_no_locker() {
    let c = cluster(3, Duration::ZERO);
    let mutex = c.ds.rw_mutex(["config"]).unwrap();
    let holder = c.ds.holder();
    let other = c.ds.holder();

    let reader = holder.read(&mutex).await.unwrap();
    let calls = c.calls();
    let attempts = [
        at_once(holder.lock(&mutex), "lock"),
        at_once(holder.try_lock(&mutex), "try_lock"),
        at_once(
            holder
                .clone()
                .lock_timeout(&mutex, Duration::from_secs(3600)),
            "lock_timeout",
        ),
    ];
    for attempt in attempts {
        match attempt {
            Err(err @ Error::UpgradeNotSupported { .. }) => {
                assert!(!err.is_retryable());
                let text = err.to_string();
                assert!(text.contains("[config]"), "{text}");
                assert!(
                    text.contains("release it before asking for the write lock"),
                    "{text}"
                );
            }
            other => panic!("expected UpgradeNotSupported, got {other:?}"),
        }
    }
    assert_eq!(c.calls(), calls);
    // The read hold is untouched: readers still share, writers wait.
    assert!(!reader.is_lost());
    other
        .try_read(&mutex)
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    assert_eq!(other.try_lock(&mutex).await.err(), Some(Error::WouldBlock));
    reader.unlock().await.unwrap();

    // A read while holding the write lock is served by the write hold.
    let writer = holder.lock(&mutex).await.unwrap();
    let calls = c.calls();
    let nested = at_once(holder.read(&mutex), "nested read").unwrap();
    assert_eq!(c.calls(), calls);
    assert_eq!(
        (nested.uid(), nested.mode(), nested.holds()),
        (writer.uid(), LockMode::Write, 2)
    );
    // The write lock stays on the lockers until the last hold of either kind.
    writer.unlock().await.unwrap();
    sleep(Duration::from_secs(1)).await;
    assert_eq!(other.try_read(&mutex).await.err(), Some(Error::WouldBlock));
    nested.unlock().await.unwrap();
    other
        .try_read(&mutex)
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn clones_racing_for_a_free_lock_make_one_acquisition() {
    // Every grant is asked for 50 ms after the call, so the first
    // acquisition is still in flight when the other clones ask.
    let c = cluster(5, Duration::from_millis(50));
    let mutex = c.ds.rw_mutex(["index"]).unwrap();
    let holder = c.ds.holder();

    let tasks: Vec<_> = (0..4)
        .map(|i| {
            let (holder, mutex) = (holder.clone(), mutex.clone());
            tokio::spawn(async move {
                if i % 2 == 0 {
                    holder.lock(&mutex).await
                } else {
                    holder.read(&mutex).await
                }
            })
        })
        .collect();
    sleep(Duration::from_millis(10)).await;
    // A clone's try_lock does not wait for the acquisition in flight.
    assert_eq!(holder.try_lock(&mutex).await.err(), Some(Error::WouldBlock));
    // A clone that went to the lockers itself would wait for its own
    // holder's lock forever.
    let joined = tokio::time::timeout(Duration::from_secs(60), futures::future::join_all(tasks))
        .await
        .expect("a clone waited for its own holder");
    let guards: Vec<_> = joined.into_iter().map(|r| r.unwrap().unwrap()).collect();
    assert_eq!(c.acquires(), 5, "one acquisition: one call per locker");
    assert!(guards.iter().all(|g| g.uid() == guards[0].uid()));
    assert!(guards.iter().all(|g| g.mode() == LockMode::Write));
    assert_eq!(guards[0].holds(), 4);
    drop(guards);
    sleep(Duration::from_secs(1)).await;
    assert!(leftovers(&c.nodes).is_empty());
}

/// Tasks of one holder on a multi-threaded runtime, where they move between
/// threads: still one holder, one acquisition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_one_holder_on_several_threads_share_the_hold() {
    let c = cluster(3, Duration::from_millis(20));
    let mutex = c.ds.rw_mutex(["shared"]).unwrap();
    let holder = c.ds.holder();
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (holder, mutex) = (holder.clone(), mutex.clone());
            tokio::spawn(async move {
                let guard = holder.lock(&mutex).await?;
                tokio::task::yield_now().await;
                Ok::<_, Error>(guard)
            })
        })
        .collect();
    let joined = tokio::time::timeout(Duration::from_secs(30), futures::future::join_all(tasks))
        .await
        .expect("a clone waited for its own holder");
    let mut guards: Vec<_> = joined.into_iter().map(|r| r.unwrap().unwrap()).collect();
    assert_eq!(c.acquires(), 3);
    assert!(guards.iter().all(|g| g.uid() == guards[0].uid()));
    let last = guards.pop().unwrap();
    drop(guards);
    last.unlock().await.unwrap();
    assert_eq!(
        c.ds.holder().try_lock(&mutex).await.map(|g| g.holds()),
        Ok(1)
    );
}
