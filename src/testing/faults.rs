//! `FaultyLocker`: a [`NetLocker`] wrapper that injects network and host
//! faults, changeable while the test runs.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::plan::{Faults, Latency, State};
use super::stats::{CallKind, CallStats, Counters};
use crate::{Error, LocalLocker, NetLocker};

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
    pub(super) inner: Arc<dyn NetLocker>,
    local: Option<Arc<LocalLocker>>,
    /// Shared with the pushes of waits that went through this node.
    pub(super) state: Arc<Mutex<State>>,
    pub(super) counters: Counters,
}

impl FaultyLocker {
    /// Wraps any locker; [`restart`](Self::restart) then only brings the
    /// node back up, since the wrapper cannot wipe a state it does not know.
    pub fn new(inner: Arc<dyn NetLocker>, seed: u64) -> Self {
        FaultyLocker {
            inner,
            local: None,
            state: Arc::new(Mutex::new(State::new(seed))),
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

    pub(super) fn state(&self) -> MutexGuard<'_, State> {
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

    /// Cuts the network between this node and the client `owner`, the
    /// [`LockArgs::owner`](crate::LockArgs::owner) its calls carry (its
    /// [`Dsync::owner`](crate::Dsync::owner)): those calls hang. Other
    /// clients are unaffected; several owners can be cut off at once.
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
        {
            let mut state = self.state();
            state.down = true;
            state.incarnation += 1;
        }
        tracing::info!(locker = %self.inner.endpoint(), "injected crash");
    }

    /// Starts the node again, crashed or not. A wrapped [`LocalLocker`]
    /// forgets every entry and enters its quarantine
    /// ([`LocalLocker::restart`]). Calls sent to the previous incarnation
    /// stay unanswered.
    pub fn restart(&self) {
        {
            let mut state = self.state();
            // Wiped under the state lock, so that no call reaches the new
            // incarnation before its table is empty.
            if let Some(local) = &self.local {
                local.restart();
            }
            state.down = false;
            state.incarnation += 1;
        }
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
}

impl fmt::Debug for FaultyLocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state();
        f.debug_struct("FaultyLocker")
            .field("endpoint", &self.inner.endpoint())
            .field("down", &state.down)
            .field("faults", &state.faults)
            .finish_non_exhaustive()
    }
}
