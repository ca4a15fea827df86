//! `FaultyLocker`: a [`NetLocker`] wrapper that injects network and host
//! faults, changeable while the test runs.

use std::collections::BTreeSet;
use std::fmt;
use std::future::{pending, Future};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::stats::{CallKind, CallStats, Counters};
use crate::{Error, LocalLocker, LockArgs, LockMode, NetLocker};

/// How long a [`FaultyLocker`] waits before forwarding each call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Latency {
    /// Forward at once.
    #[default]
    None,
    /// Wait this long before every call.
    Fixed(Duration),
    /// Wait a duration drawn uniformly from `min..=max` (bounds in either
    /// order) from the locker's seeded generator.
    Uniform {
        /// Shortest wait.
        min: Duration,
        /// Longest wait.
        max: Duration,
    },
}

/// The faults in force; read once per call, when the call starts.
#[derive(Default)]
struct Faults {
    latency: Latency,
    /// Probability of losing the reply, and whether the request is applied
    /// before the reply is lost.
    drop: Option<(f64, bool)>,
    refuse: bool,
    hang: bool,
    partitioned: BTreeSet<String>,
}

struct State {
    rng: SmallRng,
    faults: Faults,
    down: bool,
    /// Bumped by every crash and restart: a call only gets a reply from the
    /// incarnation of the node it was sent to.
    incarnation: u64,
}

/// What one call will go through, decided when it starts.
enum Plan {
    Hang(&'static str),
    Refuse,
    Forward {
        delay: Option<Duration>,
        /// `Some(applied)` when the reply is lost.
        drop: Option<bool>,
        incarnation: u64,
    },
}

type Reply<'a> = Pin<Box<dyn Future<Output = Result<bool, Error>> + Send + 'a>>;

/// A [`NetLocker`] that forwards to another one and injects faults on the
/// way: latency, lost replies, refused connections, hangs, partitions from
/// chosen clients, and crashes with restarts.
///
/// Faults can be changed at any time from any thread. Each call takes its
/// decision when it starts and keeps it, except that [`crash`](Self::crash)
/// and [`restart`](Self::restart) also silence calls still waiting in
/// injected latency, or still inside the inner locker: a dead host applies
/// and answers nothing. A silenced call never resolves, so the caller's own
/// deadline turns it into a timeout, as for a lost packet. All randomness
/// comes from a generator seeded at construction, so a current-thread
/// runtime with paused time replays the same faults for the same calls.
///
/// ```
/// use std::sync::Arc;
/// use quorum_lock::{Error, LocalLocker, LockArgs, NetLocker};
/// use quorum_lock::testing::FaultyLocker;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let node = FaultyLocker::local(Arc::new(LocalLocker::new()), 7);
/// let args = LockArgs {
///     uid: "u1".into(), resources: vec!["a".to_string()].into(),
///     owner: "client-1".into(), source: "doc".into(), quorum: 1,
/// };
/// node.set_refuse(true);
/// assert!(matches!(node.lock(&args).await, Err(Error::LockerUnavailable { .. })));
/// node.heal();
/// assert_eq!(node.lock(&args).await, Ok(true));
/// # }
/// ```
pub struct FaultyLocker {
    inner: Arc<dyn NetLocker>,
    local: Option<Arc<LocalLocker>>,
    state: Mutex<State>,
    counters: Counters,
}

impl FaultyLocker {
    /// Wraps any locker; [`restart`](Self::restart) then only brings the
    /// node back up, since the wrapper cannot wipe a state it does not know.
    pub fn new(inner: Arc<dyn NetLocker>, seed: u64) -> Self {
        FaultyLocker {
            inner,
            local: None,
            state: Mutex::new(State {
                rng: SmallRng::seed_from_u64(seed),
                faults: Faults::default(),
                down: false,
                incarnation: 0,
            }),
            counters: Counters::default(),
        }
    }

    /// Wraps a [`LocalLocker`], so that [`restart`](Self::restart) also
    /// wipes its table and starts its quarantine.
    pub fn local(inner: Arc<LocalLocker>, seed: u64) -> Self {
        let mut node = Self::new(inner.clone(), seed);
        node.local = Some(inner);
        node
    }

    /// The wrapped locker.
    pub fn inner(&self) -> &Arc<dyn NetLocker> {
        &self.inner
    }

    /// The wrapped [`LocalLocker`], when built with [`local`](Self::local).
    pub fn local_locker(&self) -> Option<&Arc<LocalLocker>> {
        self.local.as_ref()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Delays every later call.
    pub fn set_latency(&self, latency: Latency) {
        self.state().faults.latency = latency;
    }

    /// The latency in force.
    pub fn latency(&self) -> Latency {
        self.state().faults.latency
    }

    /// Loses the reply of each later call with `probability`; the request
    /// is first applied to the inner locker when `applied` is true. A
    /// probability of 0 stops losing replies. Fails with
    /// [`Error::InvalidArgument`] outside `0.0..=1.0`.
    pub fn drop_replies(&self, probability: f64, applied: bool) -> Result<(), Error> {
        if !(0.0..=1.0).contains(&probability) {
            return Err(Error::InvalidArgument(format!(
                "reply drop probability {probability} is not within 0.0..=1.0"
            )));
        }
        self.state().faults.drop = (probability > 0.0).then_some((probability, applied));
        Ok(())
    }

    /// While on, every call fails at once with [`Error::LockerUnavailable`],
    /// as a host that refuses connections does.
    pub fn set_refuse(&self, on: bool) {
        self.state().faults.refuse = on;
    }

    /// While on, every call hangs: it is neither applied nor answered.
    pub fn set_hang(&self, on: bool) {
        self.state().faults.hang = on;
    }

    /// Cuts the network between this node and the client `owner` (the
    /// [`LockArgs::owner`] it sends, the [`Dsync::owner`](crate::Dsync::owner)):
    /// its calls hang. Other clients are unaffected.
    pub fn partition(&self, owner: impl Into<String>) {
        self.state().faults.partitioned.insert(owner.into());
    }

    /// Heals the partition from `owner`. Returns whether there was one.
    pub fn heal_partition(&self, owner: &str) -> bool {
        self.state().faults.partitioned.remove(owner)
    }

    /// Heals every partition.
    pub fn heal_partitions(&self) {
        self.state().faults.partitioned.clear();
    }

    /// The owners this node is partitioned from, sorted.
    pub fn partitioned_owners(&self) -> Vec<String> {
        self.state().faults.partitioned.iter().cloned().collect()
    }

    /// Kills the node: every call hangs, including calls already waiting in
    /// injected latency, and [`is_online`](NetLocker::is_online) is false
    /// until [`restart`](Self::restart).
    pub fn crash(&self) {
        let mut state = self.state();
        state.down = true;
        state.incarnation += 1;
        tracing::info!(locker = %self.inner.endpoint(), "injected crash");
    }

    /// Starts the node again, crashed or not. A wrapped [`LocalLocker`]
    /// forgets every entry and enters its quarantine
    /// ([`LocalLocker::restart`]). Calls sent to the previous incarnation
    /// stay unanswered.
    pub fn restart(&self) {
        let mut state = self.state();
        // Wiped under the state lock, so no call reaches the new incarnation
        // before its table is empty.
        if let Some(local) = &self.local {
            local.restart();
        }
        state.down = false;
        state.incarnation += 1;
        tracing::info!(locker = %self.inner.endpoint(), "injected restart");
    }

    /// Whether the node is crashed.
    pub fn is_down(&self) -> bool {
        self.state().down
    }

    /// Clears every fault. A crashed node is restarted, as
    /// [`restart`](Self::restart) does: that is the only way back for a
    /// dead host.
    pub fn heal(&self) {
        let down = {
            let mut state = self.state();
            state.faults = Faults::default();
            state.down
        };
        if down {
            self.restart();
        }
    }

    /// Calls of `kind` seen so far, and how many of them were delayed or
    /// faulted.
    pub fn stats(&self, kind: CallKind) -> CallStats {
        self.counters.get(kind)
    }

    /// [`stats`](Self::stats) summed over every kind.
    pub fn total_stats(&self) -> CallStats {
        self.counters.total()
    }

    fn plan(&self, args: &LockArgs) -> Plan {
        let mut guard = self.state();
        let state = &mut *guard;
        let faults = &state.faults;
        if state.down {
            return Plan::Hang("node is down");
        }
        if faults.partitioned.contains(&*args.owner) {
            return Plan::Hang("partitioned from the client");
        }
        if faults.hang {
            return Plan::Hang("hanging");
        }
        if faults.refuse {
            return Plan::Refuse;
        }
        let delay = match faults.latency {
            Latency::None => None,
            Latency::Fixed(d) => Some(d),
            Latency::Uniform { min, max } => {
                let (lo, hi) = (min.min(max), min.max(max));
                let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
                Some(Duration::from_nanos(
                    state.rng.random_range(nanos(lo)..=nanos(hi)),
                ))
            }
        };
        let drop = faults
            .drop
            .and_then(|(p, applied)| state.rng.random_bool(p).then_some(applied));
        Plan::Forward {
            delay: delay.filter(|d| !d.is_zero()),
            drop,
            incarnation: state.incarnation,
        }
    }

    fn alive(&self, incarnation: u64) -> bool {
        let state = self.state();
        !state.down && state.incarnation == incarnation
    }

    async fn silence(&self, kind: CallKind, why: &'static str) -> Result<bool, Error> {
        self.counters.faulted(kind);
        tracing::trace!(locker = %self.inner.endpoint(), ?kind, why, "injected: no reply");
        pending().await
    }

    async fn call<'a>(
        &'a self,
        kind: CallKind,
        args: &LockArgs,
        forward: impl FnOnce() -> Reply<'a> + Send,
    ) -> Result<bool, Error> {
        self.counters.seen(kind);
        let (delay, drop, incarnation) = match self.plan(args) {
            Plan::Hang(why) => return self.silence(kind, why).await,
            Plan::Refuse => {
                self.counters.faulted(kind);
                return Err(Error::LockerUnavailable {
                    endpoint: self.inner.endpoint(),
                    reason: "connection refused (injected fault)".into(),
                });
            }
            Plan::Forward {
                delay,
                drop,
                incarnation,
            } => (delay, drop, incarnation),
        };
        if drop == Some(false) {
            return self.silence(kind, "request lost").await;
        }
        if let Some(delay) = delay {
            self.counters.delayed(kind);
            tokio::time::sleep(delay).await;
            if !self.alive(incarnation) {
                return self.silence(kind, "crashed during latency").await;
            }
        }
        let reply = forward().await;
        if !self.alive(incarnation) {
            return self.silence(kind, "crashed before replying").await;
        }
        if drop == Some(true) {
            return self.silence(kind, "reply lost").await;
        }
        reply
    }
}

impl fmt::Debug for FaultyLocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state();
        f.debug_struct("FaultyLocker")
            .field("endpoint", &self.inner.endpoint())
            .field("down", &state.down)
            .field("latency", &state.faults.latency)
            .field("drop", &state.faults.drop)
            .field("refuse", &state.faults.refuse)
            .field("hang", &state.faults.hang)
            .field("partitioned", &state.faults.partitioned)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl NetLocker for FaultyLocker {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.call(CallKind::Lock, args, || self.inner.lock(args))
            .await
    }

    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.call(CallKind::RLock, args, || self.inner.rlock(args))
            .await
    }

    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.call(CallKind::Unlock, args, || self.inner.unlock(args))
            .await
    }

    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.call(CallKind::RUnlock, args, || self.inner.runlock(args))
            .await
    }

    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        self.call(CallKind::Refresh, args, || self.inner.refresh(args))
            .await
    }

    async fn refresh_mode(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        // Forwarded as is: the default method would drop the mode and with
        // it a restarted locker's re-grant.
        self.call(CallKind::Refresh, args, || {
            self.inner.refresh_mode(args, mode)
        })
        .await
    }

    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.call(CallKind::ForceUnlock, args, || {
            self.inner.force_unlock(args)
        })
        .await
    }

    fn endpoint(&self) -> String {
        self.inner.endpoint()
    }

    fn is_online(&self) -> bool {
        !self.is_down() && self.inner.is_online()
    }

    fn is_local(&self) -> bool {
        self.inner.is_local()
    }
}
