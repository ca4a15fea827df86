//! The fault state of one `FaultyLocker`, and the decision it takes for
//! each call when the call starts.

use std::collections::BTreeSet;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

/// How long a [`FaultyLocker`](super::FaultyLocker) waits before
/// forwarding each call.
///
/// ```
/// use std::time::Duration;
/// use quorum_lock::testing::Latency;
///
/// // 5 to 50 ms, drawn from the node's seeded generator for every call.
/// let jittery = Latency::Uniform { min: Duration::from_millis(5), max: Duration::from_millis(50) };
/// assert_ne!(jittery, Latency::default());
/// ```
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

/// The faults in force.
#[derive(Debug, Default)]
pub(super) struct Faults {
    pub(super) latency: Latency,
    /// Probability of losing the reply, and whether the request is applied
    /// before the reply is lost.
    pub(super) drop: Option<(f64, bool)>,
    pub(super) refuse: bool,
    pub(super) hang: bool,
    pub(super) partitioned: BTreeSet<String>,
}

/// Everything a `FaultyLocker` guards with its mutex.
pub(super) struct State {
    rng: SmallRng,
    pub(super) faults: Faults,
    pub(super) down: bool,
    /// Bumped by every crash and restart: a call only gets a reply from the
    /// incarnation of the node it was sent to.
    pub(super) incarnation: u64,
}

/// What one call will go through.
pub(super) enum Plan {
    /// Never answer; the reason is for traces.
    Hang(&'static str),
    /// Fail at once, as a refused connection does.
    Refuse,
    /// Forward, possibly late, possibly losing the request or the reply.
    Forward {
        delay: Option<Duration>,
        /// `Some(applied)` when the reply is lost; the request reaches the
        /// inner locker only if `applied`.
        drop: Option<bool>,
        incarnation: u64,
    },
}

impl State {
    pub(super) fn new(seed: u64) -> Self {
        State {
            rng: SmallRng::seed_from_u64(seed),
            faults: Faults::default(),
            down: false,
            incarnation: 0,
        }
    }

    /// Decides the fate of a call from client `owner`. Random draws happen
    /// only for the faults in force, in a fixed order (latency, then drop),
    /// so the same faults and calls replay the same draws.
    pub(super) fn plan(&mut self, owner: &str) -> Plan {
        let faults = &self.faults;
        // A dead host or a cut network swallows packets: nothing is refused.
        if self.down {
            return Plan::Hang("node is down");
        }
        if faults.partitioned.contains(owner) {
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
                let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
                let (lo, hi) = (nanos(min.min(max)), nanos(min.max(max)));
                Some(Duration::from_nanos(self.rng.random_range(lo..=hi)))
            }
        };
        let drop = faults
            .drop
            .and_then(|(p, applied)| self.rng.random_bool(p).then_some(applied));
        Plan::Forward {
            // A zero sleep would still yield once; skipping it keeps an
            // in-process locker ready on its first poll.
            delay: delay.filter(|d| !d.is_zero()),
            drop,
            incarnation: self.incarnation,
        }
    }

    /// Whether no fault is in force: every call would be forwarded at once,
    /// without a random draw.
    pub(super) fn calm(&self) -> bool {
        let faults = &self.faults;
        !self.down
            && faults.partitioned.is_empty()
            && !faults.hang
            && !faults.refuse
            && faults.latency == Latency::None
            && faults.drop.is_none()
    }

    /// Whether a call sent to `incarnation` can still be answered.
    pub(super) fn alive(&self, incarnation: u64) -> bool {
        !self.down && self.incarnation == incarnation
    }
}
