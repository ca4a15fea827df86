//! The election side of a `LocalLocker`: per resource, the proclamation of
//! the exclusive entry that holds it, and the observers' watches.
//!
//! Kept beside the lock table rather than in its entries, so that locks
//! that are no election pay nothing. A proclamation names the uid that
//! made it and counts only while the table still says that uid holds the
//! resource exclusively: every read checks, so a released, expired or
//! forced-open entry never reports a leader, even before the clean-up
//! below has run.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::time::Instant;

use super::table::{block, BucketMap};
use crate::locker::proclamation::{Proclamation, WatchArgs};
use crate::locker::wait::{PushEvent, Wake};
use crate::quorum::clock::after;

/// Most watches one resource keeps; more are refused, so that a client
/// that registers without end cannot grow a locker without bound.
pub(super) const MAX_WATCHES_PER_RESOURCE: usize = 10_000;

/// What the boards keep at most for one proclamation besides the bytes of
/// its value, resource name and uid: its board's map slot at the map's
/// lowest load (3/8, since the map shrinks below that) and malloc's header
/// and rounding on the three blocks (name, uid, value). The lock server
/// charges this; see `src/net/ledger.rs`.
#[cfg_attr(not(feature = "net"), allow(dead_code))]
pub(crate) const PROCLAMATION_OVERHEAD: usize =
    ((std::mem::size_of::<(String, Board)>() + 1) * 8).div_ceil(3) + 3 * (block(16) + 15);

/// What the boards keep at most for one watch besides the bytes of its
/// resource name and uid: room for four watches (a board's list starts
/// there, and never has more than twice the room it uses), a board of its
/// own as for a proclamation, and malloc's header and rounding on the name
/// and uid.
#[cfg_attr(not(feature = "net"), allow(dead_code))]
pub(crate) const WATCH_OVERHEAD: usize = block(4 * std::mem::size_of::<Watch>())
    + ((std::mem::size_of::<(String, Board)>() + 1) * 8).div_ceil(3)
    + 2 * (block(16) + 15);

/// The room the boards' map keeps while (nearly) empty.
#[cfg_attr(not(feature = "net"), allow(dead_code))]
pub(crate) const BOARDS_KEPT: usize = block(32 * (std::mem::size_of::<(String, Board)>() + 1) + 16);

struct Watch {
    uid: Arc<str>,
    wake: Wake,
    expires: Instant,
}

#[derive(Default)]
struct Board {
    proclaimed: Option<(Arc<str>, Proclamation)>,
    watches: Vec<Watch>,
}

/// The boards by the name they are kept on.
type ByResource = BucketMap<String, Board, std::hash::RandomState>;

/// The boards of one locker.
#[derive(Default)]
pub(super) struct Boards {
    by_resource: Mutex<ByResource>,
    /// How many resources have a board: lets the lock paths skip all of
    /// this with one load when nobody uses election.
    in_use: AtomicUsize,
}

/// Pushes collected under the boards' mutex, delivered after it is let go.
#[must_use]
pub(super) struct Changes(Vec<(Wake, Arc<str>)>);

impl Changes {
    pub(super) fn deliver(self) {
        for (wake, uid) in self.0 {
            wake.notify(&uid, PushEvent::Changed);
        }
    }
}

impl Boards {
    fn boards(&self) -> MutexGuard<'_, ByResource> {
        self.by_resource
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether any resource has a proclamation or a watch.
    pub(super) fn in_use(&self) -> bool {
        self.in_use.load(Ordering::Relaxed) > 0
    }

    /// Stores `p` for `uid` on `resource`, which the caller checked `uid`
    /// holds exclusively. A newer proclamation of the same uid stays.
    pub(super) fn proclaim(&self, resource: &str, uid: &Arc<str>, p: &Proclamation) -> Changes {
        let mut boards = self.boards();
        let board = boards.entry(resource.to_owned()).or_default();
        let keep =
            matches!(&board.proclaimed, Some((held, old)) if held == uid && !p.is_newer_than(old));
        let mut changes = Vec::new();
        if !keep {
            board.proclaimed = Some((uid.clone(), p.clone()));
            take_watches(board, &mut changes);
        }
        self.count(&mut boards);
        Changes(changes)
    }

    /// The proclamation on `resource` if `holds(uid)` says its uid still
    /// holds it, after registering `watch` for `observer` when given.
    /// Returns the pushes owed to other watches when the stored
    /// proclamation turned out to be stale.
    pub(super) fn read(
        &self,
        resource: &str,
        observer: &Arc<str>,
        watch: Option<&WatchArgs>,
        now: Instant,
        holds: impl FnOnce(&str) -> bool,
    ) -> Result<(Option<Proclamation>, Changes), crate::Error> {
        let mut boards = self.boards();
        let mut changes = Vec::new();
        let found = match boards.get_mut(resource) {
            Some(board) => {
                let live = board.proclaimed.as_ref().is_some_and(|(uid, _)| holds(uid));
                if !live && board.proclaimed.take().is_some() {
                    take_watches(board, &mut changes);
                }
                board.proclaimed.as_ref().map(|(_, p)| p.clone())
            }
            None => None,
        };
        if let Some(watch) = watch {
            let board = boards.entry(resource.to_owned()).or_default();
            board
                .watches
                .retain(|w| w.expires > now && w.uid != *observer);
            fit_watches(&mut board.watches);
            if board.watches.len() >= MAX_WATCHES_PER_RESOURCE {
                self.count(&mut boards);
                return Err(crate::Error::invalid(format!(
                    "{MAX_WATCHES_PER_RESOURCE} observers already watch {resource:?} on this \
                     locker; observe through fewer handles"
                )));
            }
            board.watches.push(Watch {
                uid: observer.clone(),
                wake: watch.wake.clone(),
                expires: after(now, watch.ttl),
            });
        }
        self.tidy(&mut boards, resource);
        self.count(&mut boards);
        Ok((found, Changes(changes)))
    }

    /// The uids whose proclamations stand on `resources` (every resource
    /// with a board when `None`), for the caller to check against the
    /// table without holding this mutex (the table's shards are locked
    /// before it, never after).
    pub(super) fn proclaimers(&self, resources: Option<&[String]>) -> Vec<(String, Arc<str>)> {
        let boards = self.boards();
        let pick =
            |(r, b): (&String, &Board)| b.proclaimed.as_ref().map(|(u, _)| (r.clone(), u.clone()));
        match resources {
            Some(list) => list
                .iter()
                .filter_map(|r| boards.get_key_value(r.as_str()))
                .filter_map(pick)
                .collect(),
            None => boards.iter().filter_map(pick).collect(),
        }
    }

    /// Drops the proclamations of `stale` (resource, uid) pairs whose uid
    /// no longer holds; owes the watches of a dropped proclamation a push.
    /// With `prune`, also drops lapsed watches everywhere (the periodic
    /// pass).
    pub(super) fn drop_stale(
        &self,
        stale: Vec<(String, Arc<str>)>,
        now: Instant,
        prune: bool,
    ) -> Changes {
        let mut boards = self.boards();
        let mut changes = Vec::new();
        for (resource, uid) in stale {
            if let Some(board) = boards.get_mut(&resource)
                && board.proclaimed.as_ref().is_some_and(|(u, _)| *u == uid)
            {
                board.proclaimed = None;
                take_watches(board, &mut changes);
            }
            self.tidy(&mut boards, &resource);
        }
        if prune {
            boards.retain(|_, board| {
                board.watches.retain(|w| w.expires > now);
                fit_watches(&mut board.watches);
                board.proclaimed.is_some() || !board.watches.is_empty()
            });
        }
        self.count(&mut boards);
        Changes(changes)
    }

    /// Forgets everything, as a crash would.
    pub(super) fn wipe(&self) {
        let mut boards = self.boards();
        boards.clear();
        self.count(&mut boards);
    }

    /// How many proclamations and watches are kept.
    #[allow(dead_code)]
    pub(super) fn sizes(&self) -> (usize, usize) {
        let boards = self.boards();
        boards.values().fold((0, 0), |(p, w), b| {
            (p + usize::from(b.proclaimed.is_some()), w + b.watches.len())
        })
    }

    fn tidy(&self, boards: &mut ByResource, resource: &str) {
        if boards
            .get(resource)
            .is_some_and(|b| b.proclaimed.is_none() && b.watches.is_empty())
        {
            boards.remove(resource);
        }
    }

    /// After every change: gives back the map's room once it is sparse,
    /// after inserts too, as the lock table's maps do (see `BucketMap`), so
    /// that memory follows what is kept now rather than a peak; and counts
    /// the boards in use.
    fn count(&self, boards: &mut ByResource) {
        boards.tighten();
        self.in_use.store(boards.len(), Ordering::Relaxed);
    }
}

/// Every watch of `board` is owed one push; they end with it.
fn take_watches(board: &mut Board, changes: &mut Vec<(Wake, Arc<str>)>) {
    changes.extend(board.watches.drain(..).map(|w| (w.wake, w.uid)));
    fit_watches(&mut board.watches);
}

/// Gives back the room of watches that went, so that a board's list never
/// has more than twice the room it uses (or the four it starts with): a
/// peak of watches on a name must not stay charged to nobody. Right after
/// the list grew it uses more than half its room, so this never undoes a
/// growth.
fn fit_watches(watches: &mut Vec<Watch>) {
    if watches.capacity() > 4 && watches.capacity() > 2 * watches.len() {
        watches.shrink_to((2 * watches.len()).max(4));
    }
}
