//! `Queue`: a name's line of places, in ticket order, with an index by
//! uid once it is long, so that finding a waiter's place (every request,
//! re-check, release and end of a place does, for each name it covers)
//! costs a lookup and a binary search, not a pass over the line.
//!
//! Invariants: places in ticket order, oldest first; no uid twice and no
//! ticket twice (a waiter keeps one place per name, known by either, and
//! `Shard::enqueue` removes the old one before it inserts); while `index`
//! is kept, it maps each place's uid to that place's ticket and nothing
//! else. The index is built when the line grows past [`INDEXED`] and
//! dropped when it falls below half of that, as the readers' is. Every
//! change that takes places out gives back room at once (see
//! [`Queue::fit`]), and every insert keeps the index at least 3/8 full:
//! what the memory budget charges a place assumes both, whichever path
//! (a grant, an expiry, a force, a promotion that grants nothing) took
//! places out.

use std::sync::Arc;

use foldhash::fast::RandomState;

use super::bucket_map::BucketMap;
use super::memory::{fit, room};
use super::readers::INDEXED;
use super::Place;
use crate::locker::wait::Ticket;

#[cfg(test)]
thread_local! {
    /// Steps of the table's passes on this thread: places moved or
    /// visited in lines, names walked in a request handed back. What a
    /// test of their cost counts instead of timing them (a timed test
    /// fails on a loaded machine).
    pub(crate) static STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts `n` steps (see [`STEPS`]); nothing outside tests.
#[inline(always)]
pub(crate) fn count_steps(n: usize) {
    #[cfg(test)]
    STEPS.with(|m| m.set(m.get() + n as u64));
    #[cfg(not(test))]
    let _ = n;
}

/// The index of a long line: each place's uid to its ticket. Boxed, so
/// that a name with a short line (nearly all) pays one pointer for it.
type Index = Box<BucketMap<Arc<str>, Ticket, RandomState>>;

/// A name's line of places, oldest ticket first.
#[derive(Debug, Default)]
pub(in crate::local) struct Queue {
    list: Vec<Place>,
    /// Keyed with a randomly seeded hash, as the table is: uids come from
    /// the network.
    index: Option<Index>,
}

impl Queue {
    pub(super) fn as_slice(&self) -> &[Place] {
        &self.list
    }

    pub(super) fn iter(&self) -> std::slice::Iter<'_, Place> {
        self.list.iter()
    }

    pub(super) fn len(&self) -> usize {
        self.list.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Room the line keeps, in places.
    #[cfg(test)]
    pub(super) fn capacity(&self) -> usize {
        self.list.capacity()
    }

    /// Where the place of `ticket` stands, if any.
    pub(super) fn position_of_ticket(&self, ticket: Ticket) -> Option<usize> {
        let at = self.list.partition_point(|p| p.ticket < ticket);
        self.list.get(at).filter(|p| p.ticket == ticket).map(|_| at)
    }

    /// Where the place of `uid` stands, if any.
    pub(super) fn position_of_uid(&self, uid: &str) -> Option<usize> {
        match &self.index {
            Some(index) => self.position_of_ticket(*index.get(uid)?),
            None => self.list.iter().position(|p| &*p.args.uid == uid),
        }
    }

    /// The places of the waiter known by `uid` or by `ticket`: at most two
    /// (its uid's under another ticket, its ticket's under another uid),
    /// in line order.
    pub(super) fn positions_of_waiter(&self, uid: &str, ticket: Option<Ticket>) -> Vec<usize> {
        let mut at: Vec<usize> = ticket
            .and_then(|t| self.position_of_ticket(t))
            .into_iter()
            .chain(self.position_of_uid(uid))
            .collect();
        at.sort_unstable();
        at.dedup();
        at
    }

    /// Takes out the places of the waiter known by `uid` or by `ticket`;
    /// returns them in line order with where each stood.
    pub(super) fn remove_waiter(
        &mut self,
        uid: &str,
        ticket: Option<Ticket>,
    ) -> Vec<(usize, Place)> {
        let at = self.positions_of_waiter(uid, ticket);
        // From the back, so that the earlier position still holds.
        let mut removed: Vec<(usize, Place)> = at
            .into_iter()
            .rev()
            .map(|at| (at, self.remove(at)))
            .collect();
        removed.reverse();
        removed
    }

    /// Takes out the place at `at`.
    pub(super) fn remove(&mut self, at: usize) -> Place {
        let place = self.list.remove(at);
        count_steps(self.list.len() - at);
        if let Some(index) = &mut self.index {
            index.remove(&*place.args.uid);
        }
        self.fit();
        place
    }

    /// Inserts `place` where its ticket goes: its waiter (its uid and its
    /// ticket) must have no other place here. Returns where it stands.
    pub(super) fn insert(&mut self, place: Place) -> usize {
        debug_assert!(
            self.positions_of_waiter(&place.args.uid, Some(place.ticket))
                .is_empty(),
            "one place per waiter in a line"
        );
        // Most lines hold one place: this makes room for one at first,
        // where a vector's first growth would make room for four.
        room(&mut self.list);
        let at = self.list.partition_point(|p| p.ticket < place.ticket);
        count_steps(self.list.len() - at);
        if let Some(index) = &mut self.index {
            index.insert(place.args.uid.clone(), place.ticket);
        }
        self.list.insert(at, place);
        if self.index.is_none() && self.list.len() > INDEXED {
            self.reindex();
        }
        at
    }

    /// Keeps the places `keep` says yes to, in one pass; returns how many
    /// went.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&Place) -> bool) -> usize {
        let before = self.list.len();
        count_steps(before);
        match &mut self.index {
            Some(index) => self.list.retain(|p| {
                let kept = keep(p);
                if !kept {
                    index.remove(&*p.args.uid);
                }
                kept
            }),
            None => self.list.retain(keep),
        }
        let gone = before - self.list.len();
        if gone > 0 {
            self.fit();
        }
        gone
    }

    /// Takes the places at positions `at` (ascending) out of the line, in
    /// one pass.
    pub(super) fn take_at(&mut self, at: &[usize]) -> Vec<Place> {
        count_steps(self.list.len());
        // The head of the line (what a promotion takes nearly always): the
        // rest moves up in one copy, where the general case below moves
        // each place on its own into a new vector.
        // (A position past the end takes nothing, as in the pass below.)
        if at.len() <= self.list.len() && at.iter().copied().eq(0..at.len()) {
            let taken: Vec<Place> = self.list.drain(..at.len()).collect();
            if let Some(index) = &mut self.index {
                for place in &taken {
                    index.remove(&*place.args.uid);
                }
            }
            self.fit();
            return taken;
        }
        let mut taken = Vec::with_capacity(at.len());
        let mut kept = Vec::with_capacity(self.list.len().saturating_sub(at.len()));
        let mut next = at.iter().copied().peekable();
        for (pos, place) in std::mem::take(&mut self.list).into_iter().enumerate() {
            if next.peek() == Some(&pos) {
                next.next();
                if let Some(index) = &mut self.index {
                    index.remove(&*place.args.uid);
                }
                taken.push(place);
            } else {
                kept.push(place);
            }
        }
        self.list = kept;
        self.fit();
        taken
    }

    /// Gives back room after removals (see [`fit`]): the line's, the
    /// index's once sparse, the whole index once the line is short, and
    /// every byte once the line is empty. Each removal calls it, so that
    /// no caller can forget to.
    fn fit(&mut self) {
        if self.list.is_empty() {
            *self = Queue::default();
            return;
        }
        fit(&mut self.list);
        if self.list.len() < INDEXED / 2 {
            self.index = None;
        } else if let Some(index) = &mut self.index {
            index.tighten();
        }
    }

    fn reindex(&mut self) {
        let index = self.index.get_or_insert_with(Box::default);
        index.clear();
        index.extend(self.list.iter().map(|p| (p.args.uid.clone(), p.ticket)));
    }

    /// Whether the index holds exactly the line's uids and tickets.
    #[cfg(test)]
    pub(super) fn index_agrees(&self) -> bool {
        let ordered = self.list.windows(2).all(|w| w[0].ticket < w[1].ticket);
        let unique = {
            let uids: std::collections::HashSet<&str> =
                self.list.iter().map(|p| &*p.args.uid).collect();
            uids.len() == self.list.len()
        };
        let indexed = self.index.as_ref().is_none_or(|index| {
            index.len() == self.list.len()
                && self
                    .list
                    .iter()
                    .all(|p| index.get(&*p.args.uid) == Some(&p.ticket))
        });
        ordered && unique && indexed
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};
    use tokio::time::Instant;

    use super::super::{Name, Shard, Wounded};
    use super::INDEXED;
    use crate::locker::wait::Ticket;
    use crate::{LockArgs, LockMode};

    mod a_line_cut_short_by_a_promotions_expiry_gives_back_its_index_and_room;
    /// A line's index counted in buckets, not by `capacity()`.
    mod a_long_lines_index_by_uid_stays_at_least_three_eighths_of_its_buckets_full;

    /// The request of waiter `uid`, on the one name of these tests.
    fn waiter(uid: usize) -> LockArgs {
        LockArgs {
            uid: format!("waiter-{uid}").into(),
            resources: vec!["name".to_string()].into(),
            owner: "o".into(),
            source: "s".into(),
            quorum: 1,
        }
    }

    /// Taking places out by position, the head of the line (a
    /// promotion's usual take, moved up in one copy) or anywhere, leaves
    /// the line, its index and its room as a list would: seeded lines
    /// across the index's bounds, emptied by takes of 0 to 3 places.
    #[test]
    fn places_taken_by_position_from_the_head_or_anywhere_leave_the_line_a_list_would() {
        for seed in 0..6u64 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut shard = Shard::default();
            let start = Instant::now();
            let len = rng.random_range(1..3 * INDEXED);
            let (mut freed, mut notices) = (Vec::new(), Vec::new());
            let mut model: Vec<(u64, String)> = Vec::new();
            for uid in 0..len {
                let a = waiter(uid);
                let at = rng.random_range(0..1_000_000u64);
                if model.iter().any(|(t, _)| *t == at) {
                    continue;
                }
                shard.enqueue(
                    Name::new(&a.resources, 0),
                    &a,
                    LockMode::Read,
                    Ticket { at, tiebreak: 0 },
                    start + Duration::from_secs(60),
                    None,
                    &mut notices,
                    &mut Wounded::default(),
                    &mut freed,
                );
                let pos = model.partition_point(|(t, _)| *t < at);
                model.insert(pos, (at, a.uid.to_string()));
            }
            let mut heads = 0;
            while !model.is_empty() {
                let n = rng.random_range(0..=3usize.min(model.len()));
                let at: Vec<usize> = if rng.random_bool(0.5) {
                    (0..n).collect()
                } else {
                    let mut at: Vec<usize> =
                        (0..n).map(|_| rng.random_range(0..model.len())).collect();
                    at.sort_unstable();
                    at.dedup();
                    at
                };
                heads += usize::from(at.iter().copied().eq(0..at.len()));
                let queue = &mut shard.map.get_mut("name").expect("a line").queue;
                let taken: Vec<(u64, String)> = queue
                    .take_at(&at)
                    .into_iter()
                    .map(|p| (p.ticket.at, p.args.uid.to_string()))
                    .collect();
                let expected: Vec<(u64, String)> = at.iter().map(|&i| model[i].clone()).collect();
                for &i in at.iter().rev() {
                    model.remove(i);
                }
                assert_eq!(taken, expected, "seed {seed}: the places taken");
                let line: Vec<(u64, String)> = queue
                    .iter()
                    .map(|p| (p.ticket.at, p.args.uid.to_string()))
                    .collect();
                assert_eq!(line, model, "seed {seed}: the line left");
                assert!(queue.index_agrees(), "seed {seed}: the index");
                assert!(
                    queue.index.is_none() || queue.len() >= INDEXED / 2,
                    "seed {seed}: an index kept for {} places",
                    queue.len()
                );
                assert!(
                    queue.capacity() <= 2 * queue.len().max(1),
                    "seed {seed}: room for {} kept for {} places",
                    queue.capacity(),
                    queue.len()
                );
            }
            assert!(heads > 0, "seed {seed}: never took the head");
        }
    }

    /// Positions past the end of a line take nothing, whether the others
    /// are its head or not: a line of two asked for its first three places
    /// gives its two (the head's one-copy take once panicked there; found
    /// by a review).
    #[test]
    fn positions_past_the_end_of_a_line_take_nothing() {
        for at in [&[0, 1, 2][..], &[0, 2], &[1, 5]] {
            let mut shard = Shard::default();
            let (mut freed, mut notices) = (Vec::new(), Vec::new());
            for uid in 0..2 {
                let a = waiter(uid);
                shard.enqueue(
                    Name::new(&a.resources, 0),
                    &a,
                    LockMode::Read,
                    Ticket {
                        at: uid as u64,
                        tiebreak: 0,
                    },
                    Instant::now() + Duration::from_secs(60),
                    None,
                    &mut notices,
                    &mut Wounded::default(),
                    &mut freed,
                );
            }
            let queue = &mut shard.map.get_mut("name").expect("a line").queue;
            let taken: Vec<u64> = queue.take_at(at).iter().map(|p| p.ticket.at).collect();
            let expected: Vec<u64> = at.iter().filter(|&&i| i < 2).map(|&i| i as u64).collect();
            assert_eq!(taken, expected, "{at:?}: the places taken");
            let left: Vec<u64> = queue.iter().map(|p| p.ticket.at).collect();
            let kept: Vec<u64> = (0..2).filter(|i| !at.contains(&(*i as usize))).collect();
            assert_eq!(left, kept, "{at:?}: the line left");
        }
    }

    /// A line's index never disagrees with its places, and the line moves
    /// as a plain list does: a shard whose line grows and shrinks across
    /// the index's bounds, by places asked for (under new and reused uids
    /// and tickets), left, granted, released and expired in a seeded random
    /// order, keeps the same (ticket, uid) sequence as a list that removes
    /// a waiter's places by a pass over it.
    #[test]
    fn a_line_found_through_its_index_matches_a_list_of_the_same_history() {
        for seed in 0..6u64 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut shard = Shard::default();
            // (ticket, uid, expires at step), in ticket order.
            let mut model: Vec<(u64, usize, u64)> = Vec::new();
            let start = Instant::now();
            let uids = 3 * INDEXED;
            let args = waiter;
            let ticket = |at: u64| Ticket { at, tiebreak: 0 };
            let (mut freed, mut notices) = (Vec::new(), Vec::new());
            let mut indexed = 0;
            for step in 0..3000u64 {
                let now = start + Duration::from_millis(step);
                let uid = rng.random_range(0..uids);
                let a = args(uid);
                let name = Name::new(&a.resources, 0);
                match rng.random_range(0..10) {
                    0..=5 => {
                        let t = rng.random_range(0..4 * uids as u64);
                        let ttl = rng.random_range(50..400);
                        shard.enqueue(
                            name,
                            &a,
                            LockMode::Read,
                            ticket(t),
                            now + Duration::from_millis(ttl),
                            None,
                            &mut notices,
                            &mut Wounded::default(),
                            &mut freed,
                        );
                        model.retain(|&(mt, mu, _)| mt != t && mu != uid);
                        let at = model.partition_point(|&(mt, _, _)| mt < t);
                        model.insert(at, (t, uid, step + ttl));
                    }
                    6 => {
                        let any = rng.random_bool(0.5);
                        let t = model.iter().find(|p| p.1 == uid).map(|p| p.0);
                        let ticket_asked = if any { None } else { t.map(ticket) };
                        let left = shard.leave(name, &a.uid, ticket_asked, None, &mut freed);
                        let before = model.len();
                        model.retain(|p| p.1 != uid);
                        assert_eq!(
                            left,
                            model.len() != before,
                            "seed {seed} step {step}: leave"
                        );
                    }
                    7 => {
                        let t = rng.random_range(0..4 * uids as u64);
                        shard.grant(
                            name,
                            &a,
                            LockMode::Read,
                            now,
                            Some(ticket(t)),
                            None,
                            &mut freed,
                        );
                        model.retain(|&(mt, mu, _)| mt != t && mu != uid);
                    }
                    8 => {
                        shard.release(name, &a.uid, None, &mut freed);
                        model.retain(|p| p.1 != uid);
                    }
                    _ => {
                        shard.expire_places(now, &mut freed);
                        model.retain(|p| p.2 > step);
                    }
                }
                freed.clear();
                let line: Vec<(u64, String)> = shard
                    .map
                    .get("name")
                    .map(|r| {
                        assert!(r.queue.index_agrees(), "seed {seed} step {step}: the index");
                        assert!(
                            r.queue.index.is_none() || r.queue.len() >= INDEXED / 2,
                            "seed {seed} step {step}: an index kept for {} places",
                            r.queue.len()
                        );
                        indexed += usize::from(r.queue.index.is_some());
                        r.queue
                            .iter()
                            .map(|p| (p.ticket.at, p.args.uid.to_string()))
                            .collect()
                    })
                    .unwrap_or_default();
                let expected: Vec<(u64, String)> = model
                    .iter()
                    .map(|&(t, u, _)| (t, format!("waiter-{u}")))
                    .collect();
                assert_eq!(line, expected, "seed {seed} step {step}: the line");
                for u in 0..uids {
                    let uid = format!("waiter-{u}");
                    assert_eq!(
                        shard.queued_any("name", &uid),
                        model.iter().any(|p| p.1 == u),
                        "seed {seed} step {step}: does {uid} wait?"
                    );
                }
            }
            assert!(indexed > 0, "seed {seed}: the line was never indexed");
        }
    }
}
