//! Granting, together, the waiters at the head of lines whose requests
//! cover several names (a writer's release may let thousands of readers
//! of two names in at once).
//!
//! Invariants: a batch grants what granting its waiters one at a time, in
//! ticket order, would grant; and it walks each line once, however many
//! waiters it grants: every check moves a cursor forward over the line,
//! and the places granted leave it in one pass at the end.

use std::collections::HashSet;
use std::sync::Arc;

use tokio::time::Instant;

use super::{Holders, Shard};
use crate::locker::wait::{Ticket, Wake};
use crate::{LockArgs, LockMode};

/// One name's line as a batch of grants sees it: its holders with the
/// batch's grants so far, and how far the line is known to hold nobody
/// who stands in the way.
pub(in crate::local) struct Line {
    /// The places the batch granted, by position in the line.
    taken: Vec<bool>,
    /// Every place before this one is expired or taken.
    next_live: usize,
    /// Every writer's place before this one is expired or taken.
    next_writer: usize,
    /// The holders' mode, the batch's grants counted.
    mode: Option<LockMode>,
    /// The writer holding it, if one does.
    writer: Option<Arc<str>>,
    /// Who held it when the batch began, gathered the first time a waiter
    /// asks in the holders' mode (a name may have tens of thousands).
    held_by: Option<HashSet<Arc<str>>>,
    /// The batch's grants: the place's position and the wake to keep.
    grants: Vec<(usize, Option<Wake>)>,
}

impl Line {
    /// Counts the grant of the place at `at` to `uid` in `mode`.
    pub(in crate::local) fn take(
        &mut self,
        at: usize,
        uid: &Arc<str>,
        mode: LockMode,
        wake: Option<Wake>,
    ) {
        self.taken[at] = true;
        if self.mode.is_none() {
            self.mode = Some(mode);
            if mode == LockMode::Write {
                self.writer = Some(uid.clone());
            }
        }
        self.grants.push((at, wake));
    }
}

impl Shard {
    /// `resource`'s line as a batch of grants begins.
    pub(in crate::local) fn line(&self, resource: &str) -> Line {
        let res = self.map.get(resource);
        let holders = res.and_then(|r| r.holders.as_ref());
        Line {
            taken: vec![false; res.map_or(0, |r| r.queue.len())],
            next_live: 0,
            next_writer: 0,
            mode: holders.map(Holders::mode),
            writer: match holders {
                Some(Holders::Writer(e)) => Some(e.uid.clone()),
                _ => None,
            },
            held_by: None,
            grants: Vec::new(),
        }
    }

    /// Where the place of `waiter`'s request (its arguments, mode and
    /// ticket) stands in `resource`'s line, if that line, with the batch's
    /// grants so far, lets it in now: as [`Shard::in_line`] would answer
    /// after granting them one at a time. A request keeps one place per
    /// name, under its one ticket, so the place is found by ticket in the
    /// ordered line.
    pub(in crate::local) fn lets_in(
        &self,
        resource: &str,
        line: &mut Line,
        waiter: &(LockArgs, LockMode, Ticket),
        now: Instant,
        forced: &dyn Fn(&str) -> bool,
    ) -> Option<usize> {
        let (args, mode, ticket) = waiter;
        let (uid, mode, ticket) = (&*args.uid, *mode, *ticket);
        let queue = self.map.get(resource)?.queue.as_slice();
        let at = queue.partition_point(|p| p.ticket < ticket);
        let place = queue.get(at)?;
        if place.ticket != ticket || &*place.args.uid != uid || line.taken[at] {
            return None;
        }
        let holds = |line: &mut Line| {
            let holders = self.map.get(resource).and_then(|r| r.holders.as_ref());
            line.held_by
                .get_or_insert_with(|| {
                    holders
                        .map(|h| h.entries().iter().map(|e| e.uid.clone()).collect())
                        .unwrap_or_default()
                })
                .contains(uid)
        };
        if line.mode == Some(mode) && holds(line) {
            // Asking again for what it holds: never refused for the line.
            return Some(at);
        }
        let admitted = match (line.mode, mode) {
            (None, _) | (Some(LockMode::Read), LockMode::Read) => true,
            (Some(LockMode::Write), LockMode::Write) => line.writer.as_deref() == Some(uid),
            _ => false,
        };
        if !admitted {
            return None;
        }
        // The places ahead are those of older tickets; one of another
        // waiter that is live, not granted by the batch and conflicting
        // keeps this one waiting. Both cursors only move forward.
        // A place of a uid released or forced open here never will be
        // granted: it keeps nobody waiting.
        let live =
            |p: usize| !line.taken[p] && queue[p].expires > now && !forced(&queue[p].args.uid);
        while line.next_live < queue.len() && !live(line.next_live) {
            line.next_live += 1;
        }
        while line.next_writer < queue.len()
            && !(live(line.next_writer) && queue[line.next_writer].mode == LockMode::Write)
        {
            line.next_writer += 1;
        }
        let ahead = match mode {
            LockMode::Write => line.next_live,
            LockMode::Read => line.next_writer,
        };
        (ahead >= at).then_some(at)
    }

    /// The wake of the place at `at` in `resource`'s line.
    pub(in crate::local) fn wake_at(&self, resource: &str, at: usize) -> Option<Wake> {
        self.map
            .get(resource)?
            .queue
            .as_slice()
            .get(at)?
            .wake
            .clone()
    }

    /// Carries out the batch's grants on `resource`.
    pub(in crate::local) fn hold_line(&mut self, resource: &str, mut line: Line, now: Instant) {
        if line.grants.is_empty() {
            return;
        }
        line.grants.sort_unstable_by_key(|(at, _)| *at);
        let at: Vec<usize> = line.grants.iter().map(|(at, _)| *at).collect();
        let mut places = self.take_places(resource, &at);
        for (place, (_, wake)) in places.iter_mut().zip(line.grants) {
            place.wake = wake;
        }
        self.hold(resource, places, now);
    }
}
