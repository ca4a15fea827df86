//! The check behind `History::check`: belief intervals per resource, swept
//! in order of start.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tokio::time::Instant;

use super::event::{Event, EventKind};
use super::violation::{Holding, Violation};
use crate::LockMode;

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
            seq: self.acquired.seq,
            ended: self.ended.map(|e| e.at),
            lost: self
                .ended
                .is_some_and(|e| e.kind == EventKind::LostSignalled),
        }
    }
}

/// The earliest overlap of conflicting holders in `events`, if any.
///
/// `O(e log e)` for `e` events times resources per lock: each resource's
/// intervals are visited once in order of start, keeping the ones still
/// open in sets ordered by end.
pub(super) fn first_violation(events: &[Event]) -> Option<Violation> {
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
    first.map(|(earlier, later)| violation(&intervals[earlier], &intervals[later], &order))
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
            // A token changes no belief; `History::check_fencing` reads it.
            EventKind::Fenced { .. } => {}
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
