//! Helpers shared by the integration tests: in-memory clusters, a fault
//! injecting `NetLocker` wrapper and a leak check.

// Every test binary compiles this module but uses a different part of it.
#![allow(dead_code)]

pub mod hooked;
pub mod release_on_its_way;
pub mod shrinking;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use quorum_lock::{
    Dsync, DsyncBuilder, Error, LocalLocker, LockArgs, LockInfo, NetLocker, Observer, WriteGuard,
};

/// Cluster sizes every behaviour is checked against: the degenerate single
/// node, the even sizes where read and write quorums differ, and a large one.
pub const SIZES: [usize; 6] = [1, 2, 3, 4, 5, 16];

/// Longer than anything a background release can still be doing: the retry
/// window (`Timeouts::release_retry`, 30 s) plus one unlock deadline (5 s)
/// plus the longest injected delay.
pub const SETTLE: Duration = Duration::from_secs(60);

pub fn nodes(n: usize) -> Vec<Arc<LocalLocker>> {
    (0..n)
        .map(|i| Arc::new(LocalLocker::named(format!("node-{i}"))))
        .collect()
}

pub fn as_lockers<L: NetLocker + 'static>(lockers: &[Arc<L>]) -> Vec<Arc<dyn NetLocker>> {
    lockers
        .iter()
        .map(|l| l.clone() as Arc<dyn NetLocker>)
        .collect()
}

/// A coordinator over `lockers` whose backoff jitter replays from `seed`.
pub fn client(lockers: Vec<Arc<dyn NetLocker>>, seed: u64) -> Dsync {
    Dsync::builder(lockers)
        .owner("test-client")
        .rng_seed(seed)
        .build()
        .expect("valid coordinator")
}

/// A coordinator over `lockers` for `owner`, whose backoff jitter replays
/// from `seed`.
pub fn seeded(lockers: Vec<Arc<dyn NetLocker>>, owner: &str, seed: u64) -> Dsync {
    Dsync::builder(lockers)
        .owner(owner)
        .rng_seed(seed)
        .build()
        .expect("valid coordinator")
}

/// A coordinator over `lockers` for `owner`, whose backoff jitter replays
/// from `seed`; for tests that return their failures as text.
pub fn owned_client(
    lockers: Vec<Arc<dyn NetLocker>>,
    owner: impl Into<String>,
    seed: u64,
) -> Result<Dsync, String> {
    Dsync::builder(lockers)
        .owner(owner)
        .rng_seed(seed)
        .build()
        .map_err(|e| e.to_string())
}

/// An observer of the election `name` through `ds`; for tests that return
/// their failures as text.
pub fn observer_of(ds: &Dsync, name: &str) -> Result<Observer, String> {
    ds.election(name)
        .and_then(|election| election.observe())
        .map_err(|e| e.to_string())
}

/// `n` healthy in-memory nodes behind a coordinator with default settings.
pub fn cluster(n: usize) -> (Dsync, Vec<Arc<LocalLocker>>) {
    let nodes = nodes(n);
    let ds = Dsync::new(as_lockers(&nodes)).expect("valid coordinator");
    (ds, nodes)
}

/// Like [`cluster`], with reproducible backoff jitter.
pub fn cluster_seeded(n: usize, seed: u64) -> (Dsync, Vec<Arc<LocalLocker>>) {
    let nodes = nodes(n);
    (client(as_lockers(&nodes), seed), nodes)
}

/// `n` nodes, each reached through its own [`FaultyLocker`].
pub struct FaultyCluster {
    pub ds: Dsync,
    pub nodes: Vec<Arc<LocalLocker>>,
    pub faults: Vec<Arc<FaultyLocker>>,
}

pub fn faulty_cluster(n: usize, seed: u64) -> FaultyCluster {
    faulty_cluster_with(n, seed, |b| b)
}

/// As [`faulty_cluster`], with the coordinator's builder adjusted by `tune`.
pub fn faulty_cluster_with(
    n: usize,
    seed: u64,
    tune: impl FnOnce(DsyncBuilder) -> DsyncBuilder,
) -> FaultyCluster {
    let nodes = nodes(n);
    let faults: Vec<_> = nodes
        .iter()
        .map(|node| FaultyLocker::wrap(node.clone()))
        .collect();
    let builder = Dsync::builder(as_lockers(&faults))
        .owner("test-client")
        .rng_seed(seed);
    FaultyCluster {
        ds: tune(builder).build().expect("valid coordinator"),
        nodes,
        faults,
    }
}

impl FaultyCluster {
    /// Switches the first `count` lockers to `behaviour`.
    pub fn set_first(&self, count: usize, behaviour: Behaviour) {
        for fault in &self.faults[..count] {
            fault.set(behaviour);
        }
    }

    pub fn heal(&self) {
        self.set_first(self.faults.len(), Behaviour::Healthy);
    }
}

/// What a [`FaultyLocker`] does with the calls it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Forwards every call.
    Healthy,
    /// Answers every call with `Error::LockerUnavailable`, like a dead server.
    Fail,
    /// Never answers, like a partitioned server.
    Hang,
    /// Refuses `lock`/`rlock` without asking the inner locker, like a server
    /// where someone else holds the lock; forwards everything else.
    Refuse,
    /// Waits, then forwards, like a slow network. A caller that gives up
    /// during the wait drops the call, so it never reaches the inner locker.
    Delay(Duration),
    /// Forwards at once, then waits before answering, like a slow reply: the
    /// inner locker has acted even if the caller gives up on the answer.
    SlowReply(Duration),
}

/// Wraps any `NetLocker` and misbehaves on demand; the behaviour can be
/// switched while calls are in flight (each call reads it once, on arrival).
pub struct FaultyLocker {
    inner: Arc<dyn NetLocker>,
    behaviour: Mutex<Behaviour>,
    grants: AtomicUsize,
}

impl FaultyLocker {
    pub fn wrap(inner: Arc<dyn NetLocker>) -> Arc<Self> {
        Arc::new(FaultyLocker {
            inner,
            behaviour: Mutex::new(Behaviour::Healthy),
            grants: AtomicUsize::new(0),
        })
    }

    pub fn set(&self, behaviour: Behaviour) {
        *self
            .behaviour
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = behaviour;
    }

    pub fn behaviour(&self) -> Behaviour {
        *self
            .behaviour
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// How many `lock`/`rlock` calls the inner locker granted so far; lets a
    /// test prove that a grant really happened before checking it was undone.
    pub fn grants(&self) -> usize {
        self.grants.load(Ordering::SeqCst)
    }

    async fn forward(
        &self,
        acquire: bool,
        call: impl Future<Output = Result<bool, Error>>,
    ) -> Result<bool, Error> {
        let call = async {
            let out = call.await;
            if acquire && out == Ok(true) {
                self.grants.fetch_add(1, Ordering::SeqCst);
            }
            out
        };
        match self.behaviour() {
            Behaviour::Healthy => call.await,
            Behaviour::Fail => Err(Error::LockerUnavailable {
                endpoint: self.endpoint(),
                reason: "injected failure".into(),
            }),
            Behaviour::Hang => std::future::pending().await,
            Behaviour::Refuse if acquire => Ok(false),
            Behaviour::Refuse => call.await,
            Behaviour::Delay(wait) => {
                tokio::time::sleep(wait).await;
                call.await
            }
            Behaviour::SlowReply(wait) => {
                let out = call.await;
                tokio::time::sleep(wait).await;
                out
            }
        }
    }
}

#[async_trait]
impl NetLocker for FaultyLocker {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.forward(true, self.inner.lock(args)).await
    }

    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.forward(true, self.inner.rlock(args)).await
    }

    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.forward(false, self.inner.unlock(args)).await
    }

    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.forward(false, self.inner.runlock(args)).await
    }

    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        self.forward(false, self.inner.refresh(args)).await
    }

    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.forward(false, self.inner.force_unlock(args)).await
    }

    fn endpoint(&self) -> String {
        format!("faulty({})", self.inner.endpoint())
    }

    fn is_online(&self) -> bool {
        !matches!(self.behaviour(), Behaviour::Fail | Behaviour::Hang) && self.inner.is_online()
    }

    fn is_local(&self) -> bool {
        self.inner.is_local()
    }
}

/// Every entry on every node, labelled with the node's index.
pub fn leftovers(nodes: &[Arc<LocalLocker>]) -> Vec<(usize, LockInfo)> {
    nodes
        .iter()
        .enumerate()
        .flat_map(|(i, node)| node.snapshot().into_iter().map(move |e| (i, e)))
        .collect()
}

/// How many nodes hold an entry for `uid`.
pub fn holders_of(nodes: &[Arc<LocalLocker>], uid: &str) -> usize {
    nodes
        .iter()
        .filter(|node| node.snapshot().iter().any(|e| e.uid == uid))
        .count()
}

/// Which of `nodes` hold an entry for `uid`, in their order.
pub fn holding(nodes: &[Arc<LocalLocker>], uid: &str) -> Vec<bool> {
    nodes.iter().map(|node| holds(node, uid)).collect()
}

/// Whether `node` holds an entry for `uid`.
pub fn holds(node: &LocalLocker, uid: &str) -> bool {
    node.snapshot().iter().any(|e| e.uid == uid)
}

/// `ds` write-locks "x" with `try_lock`, within 5 s: every locker is
/// expected to grant.
pub async fn try_lock_x(ds: &Dsync) -> WriteGuard {
    try_lock(ds, "x").await
}

/// `ds` write-locks `name` with `try_lock`, within 5 s: a quorum is
/// expected to grant.
pub async fn try_lock(ds: &Dsync, name: &str) -> WriteGuard {
    tokio::time::timeout(
        Duration::from_secs(5),
        ds.rw_mutex([name]).unwrap().try_lock(),
    )
    .await
    .expect("in time")
    .expect("a quorum grants")
}

/// A coordinator over `lockers`, owned by "a", seeded with `seed`, with
/// `timeouts`.
pub fn with_timeouts(
    lockers: Vec<Arc<dyn NetLocker>>,
    seed: u64,
    timeouts: quorum_lock::Timeouts,
) -> Dsync {
    Dsync::builder(lockers)
        .owner("a")
        .rng_seed(seed)
        .timeouts(timeouts)
        .build()
        .expect("valid coordinator")
}

/// `ds.finish_releases(within)` on a runtime of its own (the scene's
/// runtime is kept, no longer driven), and which of `nodes` still hold
/// `uid` after it; both printed.
pub fn finish_elsewhere(
    ds: &Dsync,
    nodes: &[Arc<LocalLocker>],
    uid: &str,
    within: Duration,
) -> (Result<(), Error>, Vec<bool>) {
    let finished = runtime().block_on(ds.finish_releases(within));
    let left = holding(nodes, uid);
    eprintln!("finish_releases({within:?}) on another runtime: {finished:?}; lockers holding the uid {left:?}");
    (finished, left)
}

/// Unlocks `guard` from a plain thread, outside any runtime (a blocking
/// task of the current runtime waits for that thread), within 10 s.
pub async fn unlock_on_a_plain_thread(guard: WriteGuard) -> Result<(), Error> {
    tokio::time::timeout(
        Duration::from_secs(10),
        tokio::task::spawn_blocking(move || {
            std::thread::spawn(move || futures::executor::block_on(guard.unlock()))
                .join()
                .expect("the unlocking thread ends")
        }),
    )
    .await
    .expect("the unlock returns in time")
    .expect("the blocking task ends")
}

/// Lets every background release finish (in virtual time), then checks that
/// no node holds anything. `context` should name the case and seed.
pub async fn assert_no_leaks(nodes: &[Arc<LocalLocker>], context: &str) {
    tokio::time::sleep(SETTLE).await;
    let left = leftovers(nodes);
    assert!(
        left.is_empty(),
        "{context}: {} entries leaked after settling: {left:#?}",
        left.len()
    );
}

/// Arguments for calling a locker directly, as a remote client would.
pub fn args(uid: &str, resources: &[&str]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: resources.iter().map(|r| r.to_string()).collect(),
        owner: "direct".into(),
        source: "tests".into(),
        quorum: 1,
    }
}

/// Lockers a write may lose and still be granted, and one more than that.
pub fn write_faults(ds: &Dsync) -> (usize, usize) {
    let n = ds.lockers().len();
    (n - ds.write_quorum(), n - ds.write_quorum() + 1)
}

/// Lockers a read may lose and still be granted, and one more than that.
pub fn read_faults(ds: &Dsync) -> (usize, usize) {
    let n = ds.lockers().len();
    (n - ds.read_quorum(), n - ds.read_quorum() + 1)
}

/// `mutex.lock_timeout(timeout)` as a task of its own, its guard dropped
/// at once (the unlock follows in the background).
pub fn spawn_lock_timeout(
    mutex: &quorum_lock::DRWMutex,
    timeout: Duration,
) -> tokio::task::JoinHandle<Result<(), Error>> {
    let waiter = mutex.clone();
    tokio::spawn(async move { waiter.lock_timeout(timeout).await.map(|_guard| ()) })
}

/// How a wait spawned by [`spawn_lock_timeout`] ended, at most 5 s from
/// now.
pub async fn ended(wait: tokio::task::JoinHandle<Result<(), Error>>) -> Result<(), Error> {
    tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .expect("the wait ends at its deadline")
        .expect("the wait does not panic")
}

/// A current-thread runtime with time and I/O, for scenes with several
/// runtimes (one shut down, one left idle, one the lock moves to).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// A current-thread runtime on tokio's paused clock.
pub fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a paused runtime")
}

/// Drops `guard` on `runtime` as its `block_on` returning would: the
/// release task is spawned there, and the runtime (never driven again by
/// the caller) does not run it, so the release stays a batch on its way.
pub fn drop_on_an_idle_runtime<G>(runtime: &tokio::runtime::Runtime, guard: G) {
    let _on = runtime.enter();
    drop(guard);
}

/// A link to `inner` that delivers lock calls `delay` late while `late` is
/// set, counting each one it delays in `delayed`; everything else goes
/// through at once. Such a message is on the wire: it reaches the locker
/// even if the sender stopped waiting, and the sender gets the answer when
/// it arrives.
#[cfg(feature = "testing")]
pub fn late_locks(
    inner: Arc<dyn NetLocker>,
    late: Arc<std::sync::atomic::AtomicBool>,
    delayed: Arc<std::sync::atomic::AtomicUsize>,
    delay: std::time::Duration,
) -> Arc<dyn NetLocker> {
    use quorum_lock::testing::{CallKind, Relay, Route};
    use std::sync::atomic::Ordering;
    Arc::new(Relay::new(inner, move |kind, _| {
        if kind == CallKind::Lock && late.load(Ordering::SeqCst) {
            delayed.fetch_add(1, Ordering::SeqCst);
            Route::Late(delay)
        } else {
            Route::Forward
        }
    }))
}

/// Links to `lockers` where node `late_node`'s lock calls go through
/// [`late_locks`] (`delay` late while `late` is set, counted in
/// `delayed`) and the others' go straight through.
#[cfg(feature = "testing")]
pub fn one_node_with_late_locks(
    lockers: Vec<Arc<dyn NetLocker>>,
    late_node: usize,
    late: &Arc<std::sync::atomic::AtomicBool>,
    delayed: &Arc<std::sync::atomic::AtomicUsize>,
    delay: std::time::Duration,
) -> Vec<Arc<dyn NetLocker>> {
    lockers
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            if i == late_node {
                late_locks(l, late.clone(), delayed.clone(), delay)
            } else {
                l
            }
        })
        .collect()
}

/// A link to `inner` that, while `late` is set, delivers a refresh 3 s
/// late and a proclamation 3.5 s late (a leader sends it after its
/// refresh), counting each one it delays in `delayed`; everything else
/// goes through at once. As for [`late_locks`], such a message is on the
/// wire.
#[cfg(feature = "testing")]
pub fn late_refreshes(
    inner: Arc<dyn NetLocker>,
    late: Arc<std::sync::atomic::AtomicBool>,
    delayed: Arc<std::sync::atomic::AtomicUsize>,
) -> Arc<dyn NetLocker> {
    use quorum_lock::testing::{CallKind, Relay, Route};
    use std::sync::atomic::Ordering;
    Arc::new(Relay::new(inner, move |kind, _| {
        let extra = match kind {
            _ if !late.load(Ordering::SeqCst) => return Route::Forward,
            CallKind::Refresh => Duration::ZERO,
            CallKind::Proclaim => Duration::from_millis(500),
            _ => return Route::Forward,
        };
        delayed.fetch_add(1, Ordering::SeqCst);
        Route::Late(Duration::from_secs(3) + extra)
    }))
}

/// Three lockers whose node 2 restarted its 60 s quarantine 59.9 s ago
/// (100 ms before it ends), every answer 10 ms late from now on, and a
/// client "h" over them, seeded with `seed`, that backs off 1 s between
/// rounds. Paused time.
#[cfg(feature = "testing")]
pub async fn quarantine_ending_soon(seed: u64) -> (quorum_lock::testing::TestCluster, Dsync) {
    use quorum_lock::testing::{Latency, TestCluster};
    let cluster = TestCluster::new(3, seed);
    let h = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(seed)
        .retry(quorum_lock::RetryPolicy {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(1),
        })
        .build()
        .unwrap();
    cluster.restart(&[2]).unwrap();
    tokio::time::sleep(Duration::from_millis(59_900)).await;
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(10)), &[0, 1, 2])
        .unwrap();
    (cluster, h)
}

/// Three lockers of `validity`, seeded with `seed`, and a builder of a
/// `Dsync` over them, owned by "a" and seeded likewise, whose lease of
/// `validity` keeps `margin` of safety and refreshes every `refresh`.
#[cfg(feature = "testing")]
pub fn three_lockers_and_a_lease(
    seed: u64,
    validity: Duration,
    margin: Duration,
    refresh: Duration,
) -> (quorum_lock::testing::TestCluster, DsyncBuilder) {
    let cluster = quorum_lock::testing::TestCluster::with_config(
        3,
        seed,
        quorum_lock::LockerConfig {
            validity,
            ..quorum_lock::LockerConfig::default()
        },
    );
    let builder = Dsync::builder(cluster.net_lockers())
        .owner("a")
        .rng_seed(seed)
        .lease(quorum_lock::Lease {
            validity,
            safety_margin: margin,
            refresh_interval: refresh,
        });
    (cluster, builder)
}
