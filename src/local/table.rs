//! One shard of a `LocalLocker`'s lock table: who holds each resource, who
//! waits for it in ticket order, its latest fencing token, and a list of
//! entries by last refresh that makes expiry cost O(expired).

use std::collections::hash_map;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use foldhash::fast::RandomState;

use tokio::time::Instant;

use crate::locker::wait::{PushEvent, Ticket, Wake};
use crate::{LockArgs, LockMode};

mod bucket_map;
mod budget;
mod by_refresh;
mod forced;
mod memory;
mod name;
mod promote;
mod queue;
mod readers;
mod spanning;

pub(crate) use bucket_map::BucketMap;
#[cfg(feature = "net")]
pub(crate) use budget::NAME_OVERHEAD;
pub(crate) use budget::SHARD_KEPT;
use by_refresh::ByRefresh;
pub(crate) use memory::block;
pub(super) use name::Name;
pub(crate) use queue::count_steps;
use queue::Queue;
#[cfg(test)]
pub(crate) use queue::STEPS;
use readers::Readers;
pub(super) use spanning::Line;

/// One grant on one resource.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) uid: Arc<str>,
    pub(super) owner: Arc<str>,
    pub(super) source: Arc<str>,
    pub(super) acquired: Instant,
    pub(super) refreshed: Instant,
    /// The entry's node in its shard's [`ByRefresh`] list.
    slot: usize,
    /// The ticket of the wait that was granted, if it waited in line; an
    /// older waiter queued behind it wounds it.
    ticket: Option<Ticket>,
    wake: Option<Wake>,
}

/// Who holds a resource.
#[derive(Debug)]
pub(super) enum Holders {
    Writer(Entry),
    /// Never empty.
    Readers(Readers),
}

impl Holders {
    pub(super) fn mode(&self) -> LockMode {
        match self {
            Holders::Writer(_) => LockMode::Write,
            Holders::Readers(_) => LockMode::Read,
        }
    }

    pub(super) fn entries(&self) -> &[Entry] {
        match self {
            Holders::Writer(e) => std::slice::from_ref(e),
            Holders::Readers(v) => v.as_slice(),
        }
    }

    fn entries_mut(&mut self) -> &mut [Entry] {
        match self {
            Holders::Writer(e) => std::slice::from_mut(e),
            Holders::Readers(v) => v.as_mut_slice(),
        }
    }

    /// Whether `uid` holds the name: one lookup however many read it.
    fn holds(&self, uid: &str) -> bool {
        match self {
            Holders::Writer(e) => &*e.uid == uid,
            Holders::Readers(v) => v.position(uid).is_some(),
        }
    }

    /// The entry of `uid`, if it holds the name.
    fn find_mut(&mut self, uid: &str) -> Option<&mut Entry> {
        match self {
            Holders::Writer(e) => (&*e.uid == uid).then_some(e),
            Holders::Readers(v) => v.find_mut(uid),
        }
    }

    /// The entry of `uid`, if it holds the name.
    fn find(&self, uid: &str) -> Option<&Entry> {
        match self {
            Holders::Writer(e) => (&*e.uid == uid).then_some(e),
            Holders::Readers(v) => v.position(uid).map(|at| &v.as_slice()[at]),
        }
    }
}

/// A waiter's place in line on one resource.
#[derive(Debug, Clone)]
pub(super) struct Place {
    pub(super) ticket: Ticket,
    /// The whole request, so that the place can be granted later on every
    /// resource it covers.
    pub(super) args: LockArgs,
    pub(super) mode: LockMode,
    expires: Instant,
    /// `None` for a reservation: it holds the turn but is never granted
    /// without being asked again.
    pub(super) wake: Option<Wake>,
}

impl Place {
    fn is_same_waiter(&self, uid: &str, ticket: Option<Ticket>) -> bool {
        Some(self.ticket) == ticket || &*self.args.uid == uid
    }
}

fn conflicts(a: LockMode, b: LockMode) -> bool {
    a == LockMode::Write || b == LockMode::Write
}

/// Everything a shard knows about one resource name. A name with no
/// holders and nobody waiting is removed, after its fencing token is folded
/// into the shard's floor, so freed names never accumulate.
#[derive(Debug, Default)]
pub(super) struct Resource {
    holders: Option<Holders>,
    /// Ordered by ticket, oldest first; one place per waiter.
    queue: Queue,
    /// The latest fencing token drawn here; 0 when none.
    fence: u64,
}

/// A push to deliver once the shard locks are released.
pub(super) struct Notice {
    pub(super) wake: Wake,
    pub(super) uid: Arc<str>,
    pub(super) event: PushEvent,
    /// For a grant, the names of the request granted.
    pub(super) names: Option<Arc<[String]>>,
}

/// What a promotion found to do beyond its own shard.
#[derive(Default)]
pub(super) struct Promotions {
    pub(super) notices: Vec<Notice>,
    /// Places of several resources at the head of a queue, to try across
    /// their shards.
    pub(super) spanning: Vec<(LockArgs, LockMode, Ticket)>,
    /// Places of uids forced open, dropped from a line instead of granted,
    /// that stand in other lines too: to end there.
    pub(super) forced_out: Vec<(LockArgs, Ticket)>,
}

/// Whether `uid` may be granted `mode` on a resource with these holders. A
/// uid that already holds it in the same mode may re-lock (idempotent);
/// holding it in the other mode is a conflict.
pub(super) fn admits(holders: Option<&Holders>, uid: &str, mode: LockMode) -> bool {
    match (holders, mode) {
        (None, _) => true,
        (Some(Holders::Writer(e)), LockMode::Write) => &*e.uid == uid,
        (Some(Holders::Readers(_)), LockMode::Read) => true,
        (Some(_), _) => false,
    }
}

/// The resources of one shard and their expiry index.
#[derive(Default)]
pub(super) struct Shard {
    /// Keyed with a randomly seeded hash: names come from the network, so a
    /// fixed hash would let a client pile them into one bucket chain. SipHash
    /// would do too, but costs several times more per short name.
    map: BucketMap<Name, Resource, RandomState>,
    /// Every entry of the shard, least recently refreshed first.
    by_refresh: ByRefresh,
    /// Every fencing token this shard will draw from now on is above this:
    /// the tokens of removed names are folded in, and a restart raises it.
    fence_floor: u64,
}

impl Shard {
    pub(super) fn get(&self, resource: &str) -> Option<&Holders> {
        self.map.get(resource).and_then(|r| r.holders.as_ref())
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, &Holders)> {
        self.map
            .iter()
            .filter_map(|(r, res)| res.holders.as_ref().map(|h| (r.as_str(), h)))
    }

    /// Entries (grants, one per resource per holder) in this shard.
    #[cfg_attr(not(feature = "net"), allow(dead_code))]
    pub(super) fn entries(&self) -> usize {
        self.by_refresh.len
    }

    /// Resource names this shard keeps: held, or waited for.
    #[cfg_attr(not(feature = "net"), allow(dead_code))]
    pub(super) fn names(&self) -> usize {
        self.map.len()
    }

    /// Places waiting in this shard.
    pub(super) fn waiting(&self) -> usize {
        self.map.values().map(|r| r.queue.len()).sum()
    }

    /// Whether `uid` may be granted `mode` on `resource` now: the holders
    /// allow it and no live place of another waiter that conflicts with it
    /// is ahead of `ticket` (ahead of everyone, for a request without one).
    /// A place of a uid `forced` names (released or forced open here) keeps
    /// nobody out: it will never be granted, and the line drops it when it
    /// next moves on.
    pub(super) fn in_line(
        &self,
        resource: &str,
        uid: &str,
        mode: LockMode,
        ticket: Option<Ticket>,
        now: Instant,
        forced: &dyn Fn(&str) -> bool,
    ) -> bool {
        let Some(res) = self.map.get(resource) else {
            return true;
        };
        if res
            .holders
            .as_ref()
            .is_some_and(|h| h.mode() == mode && h.holds(uid))
        {
            // Asking again for what it holds: never refused for the line.
            return true;
        }
        admits(res.holders.as_ref(), uid, mode)
            && !res.queue.iter().any(|p| {
                // Cheapest tests first: the line is scanned on every request.
                ticket.is_none_or(|t| p.ticket < t)
                    && conflicts(p.mode, mode)
                    && p.expires > now
                    && !p.is_same_waiter(uid, ticket)
                    && !forced(&p.args.uid)
            })
    }

    /// Notes in `superseded` the earlier requests of the same waiter (its
    /// uid under another ticket, or its ticket under another uid) that keep
    /// a place on `resource`, which a request of `args` with `ticket` is
    /// about to replace there. The places such a request keeps on names
    /// that `args` does not name must go too (`LocalLocker::end_place`):
    /// one waiter keeps the places of its newest request only. A request
    /// is noted once; `args`'s own earlier copy is not noted.
    pub(super) fn superseded(
        &self,
        resource: &str,
        args: &LockArgs,
        ticket: Ticket,
        superseded: &mut Vec<(LockArgs, Ticket)>,
    ) {
        let Some(res) = self.map.get(resource) else {
            return;
        };
        for at in res.queue.positions_of_waiter(&args.uid, Some(ticket)) {
            let p = &res.queue.as_slice()[at];
            // The places of one request share its list of names.
            let same_request = |a: &LockArgs, t: Ticket| {
                t == p.ticket && a.uid == p.args.uid && Arc::ptr_eq(&a.resources, &p.args.resources)
            };
            if !same_request(args, ticket) && !superseded.iter().any(|(a, t)| same_request(a, *t)) {
                superseded.push((p.args.clone(), p.ticket));
            }
        }
    }

    /// Whether `uid` holds `resource`, in either mode.
    pub(super) fn holds_any(&self, resource: &str, uid: &str) -> bool {
        self.get(resource).is_some_and(|h| h.holds(uid))
    }

    /// Whether `uid` holds `resource` by a grant of its wait under `ticket`.
    #[cfg_attr(not(feature = "net"), allow(dead_code))]
    pub(super) fn holds_granted_to(&self, resource: &str, uid: &str, ticket: Ticket) -> bool {
        let entry = self.get(resource).and_then(|h| h.find(uid));
        entry.is_some_and(|e| e.ticket == Some(ticket))
    }

    /// Whether `uid` keeps a place in line on `resource` for exactly the
    /// names `names`, under any ticket: one charged as the same set.
    #[cfg(feature = "net")]
    pub(super) fn queued_for(&self, resource: &str, uid: &str, names: &[String]) -> bool {
        self.map.get(resource).is_some_and(|r| {
            r.queue
                .position_of_uid(uid)
                .is_some_and(|at| r.queue.as_slice()[at].args.resources[..] == names[..])
        })
    }

    /// Whether `uid` keeps a place in line on `resource`, under any ticket.
    pub(super) fn queued_any(&self, resource: &str, uid: &str) -> bool {
        self.map
            .get(resource)
            .is_some_and(|r| r.queue.position_of_uid(uid).is_some())
    }

    /// Whether `uid` holds `resource` in `mode`.
    pub(super) fn holds(&self, resource: &str, uid: &str, mode: LockMode) -> bool {
        self.get(resource)
            .is_some_and(|h| h.mode() == mode && h.holds(uid))
    }

    /// Grants `args.uid` on `resource` after [`admits`] said yes, and ends
    /// its place in line there. A uid that already holds the resource keeps
    /// its entry, with the newest `wake`, and `true` is returned.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn grant(
        &mut self,
        name: Name,
        args: &LockArgs,
        mode: LockMode,
        now: Instant,
        ticket: Option<Ticket>,
        wake: Option<Wake>,
        freed: &mut Vec<Name>,
    ) -> bool {
        let slot = self.map.entry(name.key());
        // The expiry index keys the entry as the map does: with the request's
        // `name` it would keep the request's whole list alive.
        let key = slot.key().clone();
        let res = slot.or_default();
        if !res.queue.is_empty() {
            let left = res.queue.remove_waiter(&args.uid, ticket);
            if !left.is_empty() && !res.queue.is_empty() {
                // The waiter's place there ended with its grant: those
                // behind it may go now (readers beside a read grant), as
                // after any place that leaves a line.
                freed.push(name);
            }
        }
        if let Some(holders) = &mut res.holders
            && let Some(e) = holders.find_mut(&args.uid)
        {
            if wake.is_some() {
                e.wake = wake;
            }
            return true;
        }
        if let Some(Holders::Writer(_)) = res.holders {
            // `admits` allows nothing else on a held resource.
            return false;
        }
        let entry = Entry {
            uid: args.uid.clone(),
            owner: args.owner.clone(),
            source: args.source.clone(),
            acquired: now,
            refreshed: now,
            slot: self.by_refresh.push(key, args.uid.clone(), now),
            ticket,
            wake,
        };
        match &mut res.holders {
            Some(Holders::Readers(v)) => v.push(entry),
            // Not a writer: returned above.
            _ => {
                res.holders = Some(match mode {
                    LockMode::Write => Holders::Writer(entry),
                    LockMode::Read => Holders::Readers(Readers::new(entry)),
                });
            }
        }
        false
    }

    /// Keeps (or renews) a place for `args.uid` on `resource`, replacing
    /// an older place of the same waiter, and collects the wounds it deals:
    /// grants of younger waits that conflict with it and stand in its way,
    /// each uid once per request however many of its names it holds
    /// (`wounded`, shared by the request's names).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn enqueue(
        &mut self,
        name: Name,
        args: &LockArgs,
        mode: LockMode,
        ticket: Ticket,
        expires: Instant,
        wake: Option<Wake>,
        notices: &mut Vec<Notice>,
        wounded: &mut Wounded,
        freed: &mut Vec<Name>,
    ) {
        let res = self.map.entry(name.key()).or_default();
        // The waiter's older place there, if it stood ahead of where the
        // new one goes (a newer ticket), or asked for the write lock where
        // the new one reads, may have kept others waiting who may go now:
        // as after any place that leaves a line.
        let removed = res.queue.remove_waiter(&args.uid, Some(ticket));
        let older = removed.first().map(|(at, _)| *at);
        let was_writer = removed
            .first()
            .is_some_and(|(_, p)| p.mode == LockMode::Write);
        let at = res.queue.insert(Place {
            ticket,
            args: args.clone(),
            mode,
            expires,
            wake,
        });
        let moves_on =
            older.is_some_and(|older| older < at) || (was_writer && mode == LockMode::Read);
        if let Some(holders) = &res.holders
            && conflicts(holders.mode(), mode)
        {
            wound_younger(holders, ticket, notices, wounded);
        }
        if moves_on {
            freed.push(name);
        }
    }

    /// Wounds the grant `uid` holds on `resource` if an older conflicting
    /// waiter is queued there: the wait that got it must not keep it while
    /// that waiter cannot proceed.
    pub(super) fn wound_if_blocking(
        &self,
        resource: &str,
        uid: &str,
        now: Instant,
        forced: &dyn Fn(&str) -> bool,
        notices: &mut Vec<Notice>,
    ) {
        let Some(res) = self.map.get(resource) else {
            return;
        };
        let Some(holders) = &res.holders else {
            return;
        };
        let Some(entry) = holders.find(uid) else {
            return;
        };
        let (Some(ticket), Some(wake)) = (entry.ticket, &entry.wake) else {
            return;
        };
        // A place of a uid released or forced open here never will be
        // granted: it wounds nobody.
        let blocked = res.queue.iter().any(|p| {
            p.expires > now
                && p.ticket < ticket
                && conflicts(p.mode, holders.mode())
                && !forced(&p.args.uid)
        });
        if blocked {
            notices.push(Notice {
                wake: wake.clone(),
                uid: entry.uid.clone(),
                event: PushEvent::Wounded,
                names: None,
            });
        }
    }

    /// Ends the place of `uid` on `resource`: the one it holds with
    /// `ticket`, or any when `None`. Returns whether there was one.
    pub(super) fn leave(
        &mut self,
        name: Name,
        uid: &str,
        ticket: Option<Ticket>,
        request: Option<&Arc<[String]>>,
        freed: &mut Vec<Name>,
    ) -> bool {
        let hash_map::Entry::Occupied(mut slot) = self.map.entry(name) else {
            return false;
        };
        let queue = &mut slot.get_mut().queue;
        let Some(at) = queue.position_of_uid(uid) else {
            return false;
        };
        let place = &queue.as_slice()[at];
        if ticket.is_some_and(|t| place.ticket != t)
            || request.is_some_and(|names| !Arc::ptr_eq(names, &place.args.resources))
        {
            return false;
        }
        queue.remove(at);
        self.fence_floor = settle(slot, self.fence_floor, freed);
        self.fit();
        true
    }

    /// Removes the entry of `uid` on `resource` if it holds it in `mode`
    /// (any mode when `None`), and its place in line. Returns whether an
    /// entry was removed.
    pub(super) fn release(
        &mut self,
        name: Name,
        uid: &str,
        mode: Option<LockMode>,
        freed: &mut Vec<Name>,
    ) -> bool {
        let hash_map::Entry::Occupied(mut slot) = self.map.entry(name) else {
            return false;
        };
        let res = slot.get_mut();
        let left = match res.queue.position_of_uid(uid) {
            Some(at) => {
                res.queue.remove(at);
                true
            }
            None => false,
        };
        let removed = match &mut res.holders {
            Some(h) if mode.is_some_and(|m| m != h.mode()) => None,
            Some(Holders::Writer(e)) if &*e.uid == uid => match res.holders.take() {
                Some(Holders::Writer(e)) => Some(e),
                _ => None,
            },
            Some(Holders::Readers(v)) => {
                let found = v.remove(uid);
                if v.is_empty() {
                    res.holders = None;
                }
                found
            }
            _ => None,
        };
        if !left && removed.is_none() {
            return false;
        }
        self.fence_floor = settle(slot, self.fence_floor, freed);
        let removed = match removed {
            Some(entry) => {
                self.by_refresh.remove(entry.slot);
                true
            }
            None => false,
        };
        self.fit();
        removed
    }

    /// Gives back the room of the map and of the expiry slab once they
    /// are sparse (see [`SLAB_KEPT`](memory::SLAB_KEPT)), after something was removed: O(1)
    /// unless they shrink, and amortised O(1) when they do.
    fn fit(&mut self) {
        self.map.tighten();
        let Some(moved) = self.by_refresh.compact_if_sparse() else {
            return;
        };
        // Every entry's node moved: give each its new slot. The entries of
        // a name are renumbered together, the first time one of its nodes
        // comes up, and marked so that its other nodes skip it (an entry
        // by entry search of a name's readers would be quadratic); a
        // second pass clears the marks.
        const MARK: usize = 1 << (usize::BITS - 1);
        for pass in [0, 1] {
            for node in &self.by_refresh.nodes {
                let Some(name) = &node.name else { continue };
                let Some(holders) = self
                    .map
                    .get_mut(name.as_str())
                    .and_then(|r| r.holders.as_mut())
                else {
                    continue;
                };
                let entries = holders.entries_mut();
                let marked = entries.first().is_some_and(|e| e.slot & MARK != 0);
                for e in entries.iter_mut() {
                    match (pass, marked) {
                        (0, false) => e.slot = moved[e.slot] | MARK,
                        (1, true) => e.slot &= !MARK,
                        _ => break,
                    }
                }
            }
        }
    }

    /// After holders or places of `name` changed: see [`settle`].
    fn settle_name(&mut self, name: Name, freed: &mut Vec<Name>) {
        if let hash_map::Entry::Occupied(slot) = self.map.entry(name) {
            self.fence_floor = settle(slot, self.fence_floor, freed);
        }
    }

    /// Drops every entry and place of `uid` in this shard. Returns whether
    /// there were any entries.
    pub(super) fn release_everywhere(&mut self, uid: &str, freed: &mut Vec<Name>) -> bool {
        let touched: Vec<Name> = self
            .map
            .iter()
            .filter(|(_, r)| {
                r.holders.as_ref().is_some_and(|h| h.holds(uid))
                    || r.queue.position_of_uid(uid).is_some()
            })
            .map(|(r, _)| r.clone())
            .collect();
        let mut any = false;
        for name in touched {
            any |= self.release(name, uid, None, freed);
        }
        any
    }

    /// Marks the entry of `uid` on `resource` as refreshed now.
    pub(super) fn refresh(&mut self, resource: &str, uid: &str, now: Instant) -> bool {
        let Some(holders) = self.map.get_mut(resource).and_then(|r| r.holders.as_mut()) else {
            return false;
        };
        let Some(entry) = holders.find_mut(uid) else {
            return false;
        };
        self.by_refresh.touch(entry.slot, now);
        entry.refreshed = now;
        true
    }

    /// The smallest token above every token drawn on `resource` here;
    /// `None` when that would not fit in a `u64`.
    pub(super) fn next_fence(&self, resource: &str) -> Option<u64> {
        let drawn = self.map.get(resource).map_or(0, |r| r.fence);
        drawn.max(self.fence_floor).checked_add(1)
    }

    /// Records `token` as the latest drawn on `resource`, which is held.
    pub(super) fn set_fence(&mut self, resource: &str, token: u64) {
        if let Some(res) = self.map.get_mut(resource) {
            res.fence = res.fence.max(token);
        }
    }

    /// Drops entries last refreshed `validity` or longer before `now`, and
    /// notes names that somebody waits for. Costs O(1) per expired entry
    /// (amortised) and nothing for live ones: each is found in its name's
    /// holders by its uid, one lookup however many read the name (a pass
    /// over the name's readers per expiry let readers of shared names
    /// that expire one by one stall the server), and a name is settled
    /// when its last holder goes (while readers remain, nobody waiting can
    /// be granted).
    pub(super) fn expire(
        &mut self,
        now: Instant,
        validity: Duration,
        freed: &mut Vec<Name>,
    ) -> usize {
        let mut gone = 0;
        while let Some((slot, refreshed)) = self.by_refresh.oldest() {
            // A validity too long to add is "never": clamping it would free
            // an entry its holder still trusts.
            if refreshed.checked_add(validity).is_none_or(|end| end > now) {
                break;
            }
            let Some((name, uid)) = self.by_refresh.remove(slot) else {
                break;
            };
            gone += 1;
            // Slots stay as they are until `fit` below: the holders still
            // name them.
            let hash_map::Entry::Occupied(mut held) = self.map.entry(name) else {
                continue;
            };
            let res = held.get_mut();
            let emptied = match &mut res.holders {
                Some(Holders::Writer(e)) => e.slot == slot,
                Some(Holders::Readers(v)) => {
                    // The node's entry: its uid's, in the slot the node had.
                    v.remove_if(&uid, |e| e.slot == slot);
                    v.fit();
                    v.is_empty()
                }
                None => false,
            };
            if emptied {
                res.holders = None;
                self.fence_floor = settle(held, self.fence_floor, freed);
            }
        }
        if gone > 0 {
            self.fit();
        }
        gone
    }

    /// When the entry refreshed longest ago was last refreshed: the next
    /// one to expire.
    pub(super) fn oldest_refresh(&self) -> Option<Instant> {
        self.by_refresh.oldest().map(|(_, at)| at)
    }

    /// Drops places whose waiters stopped asking, and notes the names whose
    /// line moved.
    pub(super) fn expire_places(&mut self, now: Instant, freed: &mut Vec<Name>) {
        let stale: Vec<Name> = self
            .map
            .iter_mut()
            .filter_map(|(name, res)| {
                let gone = res.queue.retain(|p| p.expires > now);
                (gone > 0).then(|| name.clone())
            })
            .collect();
        for name in stale {
            self.settle_name(name, freed);
        }
        self.fit();
    }

    /// Drops everything, as a crash would, except the fencing floor, which
    /// the caller raises past anything drawn before.
    pub(super) fn wipe(&mut self) {
        self.map = BucketMap::default();
        self.by_refresh.clear();
        // A crashed server forgets its counters too; tokens drawn after the
        // quarantine start from the clock instead (see `LocalLocker::fence`).
        self.fence_floor = 0;
    }
}

/// After holders or places of a resource changed: drops the resource if
/// nothing is left on it, folding its fencing token into the shard's
/// `fence_floor` (returned, raised), or notes it in `freed` for promotion
/// if somebody waits.
fn settle(
    mut slot: hash_map::OccupiedEntry<'_, Name, Resource>,
    fence_floor: u64,
    freed: &mut Vec<Name>,
) -> u64 {
    let res = slot.get();
    if res.holders.is_none() && res.queue.is_empty() {
        let (_, res) = slot.remove_entry();
        return fence_floor.max(res.fence);
    }
    let res = slot.get_mut();
    if let Some(Holders::Readers(v)) = &mut res.holders {
        v.fit();
    }
    if res.queue.is_empty() {
        return fence_floor;
    }
    // Not searched for duplicates here (names may be long and many, and a
    // search per name was quadratic): the caller's promote skips a name
    // it has seen.
    freed.push(slot.key().clone());
    fence_floor
}

/// The grants a request wounded already, by uid and by where the wound is
/// pushed: each is told once however many of the request's names it holds
/// (a uid granted names through two waits is told through each). Keyed
/// with a randomly seeded hash, as the table is: the uids come from the
/// network.
pub(super) type Wounded = HashSet<(Arc<str>, (usize, usize)), RandomState>;

/// Wounds every holder in `holders` whose wait is younger than `ticket`,
/// but those in `wounded` already.
fn wound_younger(
    holders: &Holders,
    ticket: Ticket,
    notices: &mut Vec<Notice>,
    wounded: &mut Wounded,
) {
    for e in holders.entries() {
        if let (Some(t), Some(wake)) = (e.ticket, &e.wake)
            && t > ticket
            && wounded.insert((e.uid.clone(), wake.target()))
        {
            notices.push(Notice {
                wake: wake.clone(),
                uid: e.uid.clone(),
                event: PushEvent::Wounded,
                names: None,
            });
        }
    }
}

/// Counts what a test allocates, to count a map's buckets.
#[cfg(test)]
mod counting;

#[cfg(test)]
mod tests;
