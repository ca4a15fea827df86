//! `History`: who believed they held which lock when, and the check that no
//! two conflicting holders ever believed it at once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::time::Instant;

use super::violation::{Holding, Violation};
use crate::LockMode;

/// What happened to a holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// The holder was granted `resources` in `mode` and now believes it
    /// holds them.
    Acquired {
        /// The locked names.
        resources: Vec<String>,
        /// Read or write.
        mode: LockMode,
    },
    /// The holder was told it lost the lock, and stops believing it holds it.
    LostSignalled,
    /// The holder started releasing the lock, and stops believing it holds it.
    Released,
}

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Position in recording order, from 0; orders events with equal `at`.
    pub seq: u64,
    /// When it happened, on tokio's (possibly paused) clock.
    pub at: Instant,
    /// Who it happened to: any id unique per acquisition, such as
    /// [`WriteGuard::uid`](crate::WriteGuard::uid).
    pub holder: String,
    /// What happened.
    pub kind: EventKind,
}

/// A log of lock acquisitions, losses and releases, shared by the tasks of a
/// test (wrap it in an `Arc`), and a checker for mutual exclusion.
///
/// A holder believes it holds its lock from [`acquired`](Self::acquired)
/// until the first [`lost_signalled`](Self::lost_signalled) or
/// [`released`](Self::released); record `acquired` right after the lock is
/// granted and `released` right before unlocking. Events are ordered by time,
/// then by the order they were recorded in, so at one instant a release
/// recorded before an acquisition does not overlap it.
///
/// A holder id that acquires again while it still holds adds to what it
/// holds; its next loss or release ends all of it. A holder never conflicts
/// with itself.
///
/// ```
/// use quorum_lock::LockMode;
/// use quorum_lock::testing::History;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let h = History::new();
/// h.acquired("a", ["x"], LockMode::Write);
/// h.released("a");
/// h.acquired("b", ["x"], LockMode::Write);
/// assert!(h.check().is_ok());
/// h.acquired("c", ["x"], LockMode::Read); // b still holds x
/// let violation = h.check().unwrap_err();
/// assert_eq!((violation.earlier.holder.as_str(), violation.later.holder.as_str()), ("b", "c"));
/// # }
/// ```
#[derive(Debug, Default)]
pub struct History {
    events: Mutex<Vec<Event>>,
}

/// An instant made unique by its recording sequence number.
type Key = (Instant, u64);

/// One stretch of time during which a holder believed it held a lock.
struct Interval<'e> {
    acquired: &'e Event,
    resources: &'e [String],
    mode: LockMode,
    ended: Option<&'e Event>,
}

impl Interval<'_> {
    fn start(&self) -> Key {
        (self.acquired.at, self.acquired.seq)
    }

    /// Sorts intervals that never end after every one that does.
    fn end(&self) -> (bool, Option<Key>) {
        (self.ended.is_none(), self.ended.map(|e| (e.at, e.seq)))
    }

    fn holding(&self) -> Holding {
        Holding {
            holder: self.acquired.holder.clone(),
            mode: self.mode,
            acquired: self.acquired.at,
            ended: self.ended.map(|e| e.at),
            lost: self
                .ended
                .is_some_and(|e| e.kind == EventKind::LostSignalled),
        }
    }
}

impl History {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock_events(&self) -> MutexGuard<'_, Vec<Event>> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that `holder` was granted `resources` in `mode`, now.
    pub fn acquired<I, S>(&self, holder: impl Into<String>, resources: I, mode: LockMode)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let resources = resources.into_iter().map(Into::into).collect();
        self.record(holder, EventKind::Acquired { resources, mode });
    }

    /// Records that `holder` was told it lost its lock, now.
    pub fn lost_signalled(&self, holder: impl Into<String>) {
        self.record(holder, EventKind::LostSignalled);
    }

    /// Records that `holder` started releasing its lock, now.
    pub fn released(&self, holder: impl Into<String>) {
        self.record(holder, EventKind::Released);
    }

    /// Records `kind` for `holder` at the current time of tokio's clock.
    pub fn record(&self, holder: impl Into<String>, kind: EventKind) {
        let holder = holder.into();
        let mut events = self.lock_events();
        // Read under the lock, so that time never goes back along `seq`.
        let at = Instant::now();
        let seq = events.len() as u64;
        events.push(Event {
            seq,
            at,
            holder,
            kind,
        });
    }

    /// Records `kind` for `holder` at `at`, for histories built by hand or
    /// replayed from a log.
    pub fn record_at(&self, at: Instant, holder: impl Into<String>, kind: EventKind) {
        let holder = holder.into();
        let mut events = self.lock_events();
        let seq = events.len() as u64;
        events.push(Event {
            seq,
            at,
            holder,
            kind,
        });
    }

    /// How many events were recorded.
    pub fn len(&self) -> usize {
        self.lock_events().len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.lock_events().is_empty()
    }

    /// A copy of every event, in recording order.
    pub fn events(&self) -> Vec<Event> {
        self.lock_events().clone()
    }

    /// Checks that no two holders ever both believed they held a common
    /// resource in conflicting modes (write with write, or write with
    /// read). Reports the earliest such overlap.
    ///
    /// Runs in `O(e log e)` for `e` events times resources per lock.
    pub fn check(&self) -> Result<(), Violation> {
        let events = self.lock_events();
        let mut order: Vec<&Event> = events.iter().collect();
        order.sort_by_key(|e| (e.at, e.seq));
        let intervals = intervals(&order);

        // Every resource's intervals, in order of start since `intervals`
        // is; a BTreeMap so that ties between resources break by name.
        let mut by_resource: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, interval) in intervals.iter().enumerate() {
            let names: BTreeSet<&str> = interval.resources.iter().map(String::as_str).collect();
            for name in names {
                by_resource.entry(name).or_default().push(i);
            }
        }
        let first = by_resource
            .values()
            .filter_map(|list| first_conflict(&intervals, list))
            .min_by_key(|&(earlier, later)| (intervals[later].start(), intervals[earlier].start()));
        match first {
            None => Ok(()),
            Some((earlier, later)) => {
                Err(violation(&intervals[earlier], &intervals[later], &order))
            }
        }
    }
}

/// Turns the time-ordered events into belief intervals, in order of start.
fn intervals<'e>(order: &[&'e Event]) -> Vec<Interval<'e>> {
    let mut intervals = Vec::new();
    let mut open: HashMap<&str, Vec<usize>> = HashMap::new();
    for &event in order {
        match &event.kind {
            EventKind::Acquired { resources, mode } => {
                open.entry(&event.holder).or_default().push(intervals.len());
                intervals.push(Interval {
                    acquired: event,
                    resources,
                    mode: *mode,
                    ended: None,
                });
            }
            // A loss or release with nothing open (a second release, or a
            // release after the loss) changes no belief.
            EventKind::LostSignalled | EventKind::Released => {
                for i in open.remove(event.holder.as_str()).unwrap_or_default() {
                    intervals[i].ended = Some(event);
                }
            }
        }
    }
    intervals
}

/// Sweeps one resource's intervals by start and returns the first pair
/// `(earlier, later)` of different holders that overlap in conflicting modes.
fn first_conflict(intervals: &[Interval<'_>], list: &[usize]) -> Option<(usize, usize)> {
    let mut readers = BTreeSet::new();
    let mut writers = BTreeSet::new();
    for &i in list {
        let this = &intervals[i];
        let start = this.start();
        for active in [&mut readers, &mut writers] {
            // Ended at or before this start: an end key equal to a start key
            // is impossible, since every event has its own sequence number.
            while let Some(&((false, Some(end)), _)) = active.first() {
                if end > start {
                    break;
                }
                active.pop_first();
            }
        }
        let holder = &this.acquired.holder;
        let other = |set: &BTreeSet<((bool, Option<Key>), usize)>| {
            set.iter()
                .map(|&(_, j)| j)
                .find(|&j| intervals[j].acquired.holder != *holder)
        };
        let conflict = match this.mode {
            LockMode::Write => other(&writers).or_else(|| other(&readers)),
            LockMode::Read => other(&writers),
        };
        if let Some(j) = conflict {
            return Some((j, i));
        }
        match this.mode {
            LockMode::Write => writers.insert((this.end(), i)),
            LockMode::Read => readers.insert((this.end(), i)),
        };
    }
    None
}

fn violation(earlier: &Interval<'_>, later: &Interval<'_>, order: &[&Event]) -> Violation {
    let theirs: BTreeSet<&String> = earlier.resources.iter().collect();
    let mut resources: Vec<String> = later
        .resources
        .iter()
        .filter(|r| theirs.contains(r))
        .cloned()
        .collect();
    resources.sort_unstable();
    resources.dedup();
    let until = match (earlier.ended, later.ended) {
        (Some(a), Some(b)) => Some(if (a.at, a.seq) < (b.at, b.seq) {
            a.at
        } else {
            b.at
        }),
        (a, b) => a.or(b).map(|e| e.at),
    };
    Violation {
        earlier: earlier.holding(),
        later: later.holding(),
        resources,
        from: later.acquired.at,
        until,
        origin: order.first().map_or(later.acquired.at, |e| e.at),
    }
}
