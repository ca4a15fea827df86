//! Lock servers that start announcing a validity shorter than the lease,
//! as a lock server restarted with another setting does: for the scenes
//! of a locker that no longer honours the lease.
//!
//! Each server is a [`Script`]: which locker it runs now, what validity it
//! announces, and what happens around its lock and refresh calls (a
//! delay, an announcement, a restart). [`Scripted`] makes a script a
//! locker that forwards every call to the locker the script runs.

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use quorum_lock::{
    Dsync, Error, Lease, LocalLocker, LockArgs, LockInfo, LockMode, LockerConfig, NetLocker,
    Proclamation, Timeouts, WaitArgs, WaitReply, WatchArgs, WriteGuard,
};

use super::args;

/// What a server does besides forwarding calls to the locker it runs.
#[async_trait]
pub trait Script: Send + Sync {
    /// The locker the server runs now.
    fn runs(&self) -> Arc<dyn NetLocker>;
    /// The validity it announces: by default the running locker's own.
    fn validity(&self) -> Option<Duration> {
        self.runs().validity()
    }
    /// When a lock or rlock call arrives, before the locker sees it.
    async fn lock_arrives(&self) {}
    /// Once the locker answered a lock or rlock call.
    fn lock_answered(&self) {}
    /// When a refresh arrives, before the locker sees it.
    async fn refresh_arrives(&self) {}
    /// Once the locker answered a refresh.
    fn refresh_answered(&self) {}
}

/// A locker playing the script `S`.
pub struct Scripted<S>(pub S);

impl<S> Deref for Scripted<S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.0
    }
}

#[async_trait]
impl<S: Script> NetLocker for Scripted<S> {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.0.lock_arrives().await;
        let answer = self.0.runs().lock(args).await;
        self.0.lock_answered();
        answer
    }
    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.0.lock_arrives().await;
        let answer = self.0.runs().rlock(args).await;
        self.0.lock_answered();
        answer
    }
    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.0.runs().unlock(args).await
    }
    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.0.runs().runlock(args).await
    }
    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        self.0.refresh_arrives().await;
        let answer = self.0.runs().refresh(args).await;
        self.0.refresh_answered();
        answer
    }
    async fn refresh_mode(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        self.0.refresh_arrives().await;
        let answer = self.0.runs().refresh_mode(args, mode).await;
        self.0.refresh_answered();
        answer
    }
    async fn lock_wait(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error> {
        self.0.runs().lock_wait(args, mode, wait).await
    }
    fn queues(&self) -> bool {
        self.0.runs().queues()
    }
    async fn fence(
        &self,
        args: &LockArgs,
        mode: LockMode,
        floor: u64,
    ) -> Result<Option<u64>, Error> {
        self.0.runs().fence(args, mode, floor).await
    }
    async fn proclaim(&self, args: &LockArgs, p: &Proclamation) -> Result<bool, Error> {
        self.0.runs().proclaim(args, p).await
    }
    async fn leader(
        &self,
        args: &LockArgs,
        watch: Option<&WatchArgs>,
    ) -> Result<Option<Proclamation>, Error> {
        self.0.runs().leader(args, watch).await
    }
    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.0.runs().force_unlock(args).await
    }
    async fn locks(&self) -> Result<Vec<LockInfo>, Error> {
        self.0.runs().locks().await
    }
    fn endpoint(&self) -> String {
        self.0.runs().endpoint()
    }
    fn is_online(&self) -> bool {
        self.0.runs().is_online()
    }
    fn is_local(&self) -> bool {
        self.0.runs().is_local()
    }
    fn validity(&self) -> Option<Duration> {
        self.0.validity()
    }
}

/// `inner`, announcing a validity of 1 s once `short` is set.
pub struct Shrinking {
    pub inner: Arc<dyn NetLocker>,
    pub short: Arc<AtomicBool>,
}

impl Script for Shrinking {
    fn runs(&self) -> Arc<dyn NetLocker> {
        self.inner.clone()
    }
    fn validity(&self) -> Option<Duration> {
        if self.short.load(Ordering::SeqCst) {
            Some(Duration::from_secs(1))
        } else {
            self.inner.validity()
        }
    }
}

/// Which call of its own makes an [`Announcing`] server's validity known.
pub enum Learns {
    /// None: `learned` is set from outside.
    Elsewhere,
    /// A lock or rlock call, as it arrives (the reconnect it came on met
    /// the restarted server).
    WhenALockArrives,
    /// A lock or rlock call, once answered.
    WhenALockIsAnswered,
}

/// `inner`, announcing no validity until `learned` is set (a reconnect to
/// the server, restarted with another validity), then `announces`, or the
/// inner locker's own when that is `None`.
pub struct Announcing {
    pub inner: Arc<dyn NetLocker>,
    pub learned: Arc<AtomicBool>,
    pub learns: Learns,
    pub announces: Option<Duration>,
}

impl Announcing {
    /// A fresh `LocalLocker` named `name` that announces a validity of 1 s
    /// once `learned` is set from outside.
    pub fn one_second_once(name: &str, learned: &Arc<AtomicBool>) -> Arc<Scripted<Announcing>> {
        Arc::new(Scripted(Announcing {
            inner: Arc::new(LocalLocker::named(name)),
            learned: learned.clone(),
            learns: Learns::Elsewhere,
            announces: Some(Duration::from_secs(1)),
        }))
    }
}

#[async_trait]
impl Script for Announcing {
    fn runs(&self) -> Arc<dyn NetLocker> {
        self.inner.clone()
    }
    fn validity(&self) -> Option<Duration> {
        if !self.learned.load(Ordering::SeqCst) {
            None
        } else {
            self.announces.or_else(|| self.inner.validity())
        }
    }
    async fn lock_arrives(&self) {
        if let Learns::WhenALockArrives = self.learns {
            self.learned.store(true, Ordering::SeqCst);
        }
    }
    fn lock_answered(&self) {
        if let Learns::WhenALockIsAnswered = self.learns {
            self.learned.store(true, Ordering::SeqCst);
        }
    }
}

/// Which calls of a [`Midway`] server take their time.
pub enum Slowed {
    Locks,
    Refreshes,
}

/// `inner`, whose lock calls or refreshes (`slowed`) take 10 ms once
/// `armed`; 5 ms into one, `announce` is set: another locker's new
/// validity is announced while this call is on its way.
pub struct Midway {
    pub inner: Arc<dyn NetLocker>,
    pub slowed: Slowed,
    pub armed: Arc<AtomicBool>,
    pub announce: Arc<AtomicBool>,
}

impl Midway {
    async fn take_time(&self, slowed: Slowed) {
        let matches = matches!(
            (&self.slowed, slowed),
            (Slowed::Locks, Slowed::Locks) | (Slowed::Refreshes, Slowed::Refreshes)
        );
        if matches && self.armed.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(5)).await;
            self.announce.store(true, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

#[async_trait]
impl Script for Midway {
    fn runs(&self) -> Arc<dyn NetLocker> {
        self.inner.clone()
    }
    async fn lock_arrives(&self) {
        self.take_time(Slowed::Locks).await;
    }
    async fn refresh_arrives(&self) {
        self.take_time(Slowed::Refreshes).await;
    }
}

/// A server behind one address: a restart swaps in the locker it runs
/// afterwards, with the validity that one announces.
pub struct Address {
    runs: Mutex<Arc<LocalLocker>>,
    restarts_as: Mutex<Option<Arc<LocalLocker>>>,
    /// The refreshes it answered.
    pub refreshes: AtomicUsize,
}

impl Address {
    pub fn new(runs: Arc<LocalLocker>) -> Self {
        Address {
            runs: Mutex::new(runs),
            restarts_as: Mutex::new(None),
            refreshes: AtomicUsize::new(0),
        }
    }

    /// Restarts the server now, running `next` (its table wiped).
    pub fn restart_as(&self, next: Arc<LocalLocker>) {
        next.restart();
        *self.runs.lock().unwrap_or_else(PoisonError::into_inner) = next;
    }

    /// Restarts the server as `next` right after it answers its next
    /// refresh, before the answer is read: the reconnect announces its new
    /// validity.
    pub fn restart_after_the_next_refresh(&self, next: Arc<LocalLocker>) {
        *self
            .restarts_as
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(next);
    }
}

impl Script for Address {
    fn runs(&self) -> Arc<dyn NetLocker> {
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
    fn refresh_answered(&self) {
        self.refreshes.fetch_add(1, Ordering::SeqCst);
        let next = self
            .restarts_as
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(next) = next {
            self.restart_as(next);
        }
    }
}

/// A locker named `name` that keeps entries 1 s, after a restart waiting
/// out `quarantine`.
pub fn one_second_locker(name: &str, quarantine: Duration) -> Arc<LocalLocker> {
    Arc::new(LocalLocker::with_config(
        name,
        LockerConfig {
            validity: Duration::from_secs(1),
            quarantine,
        },
    ))
}

/// A client `z` over `lockers` whose 1 s lease fits a locker that keeps
/// entries 1 s (with short call timeouts), replaying `seed`.
pub fn one_second_client(lockers: Vec<Arc<dyn NetLocker>>, seed: u64) -> Dsync {
    Dsync::builder(lockers)
        .owner("z")
        .rng_seed(seed)
        .lease(Lease {
            validity: Duration::from_secs(1),
            refresh_interval: Duration::from_millis(200),
            safety_margin: Duration::from_millis(300),
        })
        .timeouts(Timeouts {
            acquire: Duration::from_millis(100),
            refresh: Duration::from_millis(100),
            ..Timeouts::default()
        })
        .build()
        .expect("z's settings fit the lockers")
}

/// The three lockers of the scenes where `y` holds "res" on locker 2, and
/// locker 0 keeps entries 1 s; with `y`'s lock, for its release.
pub async fn y_holding_res_on_locker_2() -> ([Arc<LocalLocker>; 3], LockArgs) {
    let node0 = one_second_locker("node-0", Duration::ZERO);
    let node1 = Arc::new(LocalLocker::named("node-1"));
    let node2 = Arc::new(LocalLocker::named("node-2"));
    let y = args("y", &["res"]);
    assert!(
        node2.lock(&y).await.expect("answers"),
        "y holds res on locker 2"
    );
    ([node0, node1, node2], y)
}

/// After `wait`, `z` tries "res" while `x` holds `x_guard`; says what both
/// see at that moment, `when`. Returns `z`'s answer.
pub async fn z_tries_after(
    wait: Duration,
    when: &str,
    z: &Dsync,
    x_guard: &WriteGuard,
) -> Result<WriteGuard, Error> {
    tokio::time::sleep(wait).await;
    let z_guard = z.rw_mutex(["res"]).unwrap().try_lock().await;
    eprintln!(
        "{when}: z's try_lock: {:?}; x's guard lost: {}",
        z_guard.as_ref().map(|_| ()),
        x_guard.is_lost()
    );
    z_guard
}

/// `x` (replaying `seed`) holding "res" on `node0` and two lockers of
/// the default validity, which it returns beside its guard.
pub async fn x_holding_res_beside(
    node0: Arc<dyn NetLocker>,
    seed: u64,
) -> (Dsync, WriteGuard, Arc<LocalLocker>, Arc<LocalLocker>) {
    let node1 = Arc::new(LocalLocker::named("node-1"));
    let node2 = Arc::new(LocalLocker::named("node-2"));
    let x = super::seeded(vec![node0, node1.clone(), node2.clone()], "x", seed);
    let x_guard = x.rw_mutex(["res"]).unwrap().lock().await.expect("x locks");
    (x, x_guard, node1, node2)
}

/// `lockers` with the first one [`Shrinking`], and the switch that makes
/// it announce 1 s.
pub fn first_shrinking(
    lockers: Vec<Arc<dyn NetLocker>>,
) -> (Vec<Arc<dyn NetLocker>>, Arc<AtomicBool>) {
    let short = Arc::new(AtomicBool::new(false));
    let lockers = lockers
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            if i == 0 {
                Arc::new(Scripted(Shrinking {
                    inner: l,
                    short: short.clone(),
                })) as Arc<dyn NetLocker>
            } else {
                l
            }
        })
        .collect();
    (lockers, short)
}
