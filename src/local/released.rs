//! The uids a locker released recently. A lock, a wait in line or a
//! refresh for one of them can only be a message that was overtaken by its
//! own release (across a reconnect, a call delayed on its way past its
//! caller's deadline, a waiter's re-check sent before it gave up), so it
//! is refused instead of leaving an entry nobody will unlock. A
//! `LocalLocker` keeps one; a lock server serving it uses the same record,
//! with the server's limits.

use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::quorum::clock::Clock;

/// What one remembered uid costs besides its bytes, at most, as counted
/// against the bound, while the structures grow: the record keeps 56
/// bytes per uid in its queues (a 16-byte stamp, and the uid's first
/// [`INLINE`] bytes), which double when full (3 slots per uid, 168 bytes,
/// while a full queue is copied into one twice its size), and 8 bytes per
/// slot of its index, which is rebuilt with 2 to 4 slots per uid (past
/// [`INDEX_KEPT`]) once half its slots hold remembered uids (64 bytes
/// while it is rebuilt: up to 4 old slots per uid and 4 new). A longer
/// uid also keeps its place in a queue of shared strings (24
/// bytes, 72 while it grows) and, when the record keeps the last share of
/// it, its own string: its length and the counts and malloc's header and
/// rounding (about 40). That is about 350 besides the uid's length.
/// Neither structure shrinks (as the record before this one), so after a
/// peak they keep the room the peak's uids were counted for (the
/// released uids' and the forced ones', each its own). 512 is
/// counted, as for the record before this one (a map of shared strings,
/// which measured up to 443 in `tests/net_memory.rs`), so that the same
/// uids are remembered under the same limits; counting less would let
/// more be kept.
pub(crate) const TOMBSTONE_OVERHEAD: usize = 512;

/// What remembering `uid` costs, in bytes, as counted against the bound.
pub(crate) fn tombstone_bytes(uid: &str) -> usize {
    uid.len() + TOMBSTONE_OVERHEAD
}

/// How many bytes of each uid the record keeps in a queue of its own: the
/// library's uids (36 bytes) fit whole. A longer uid's string is shared.
const INLINE: usize = 40;

/// The most uids the record keeps, whatever its limits: its index numbers
/// them in 32 bits (at 512 bytes and more each, that is 512 GiB).
const MAX_UIDS: usize = 1 << 30;

/// The fewest slots of the index.
const INDEX_KEPT: usize = 128;

/// How many uids may be forgotten between two rebuilds of the index at
/// most, so that the 32-bit number of a forgotten uid, left in its slot,
/// never comes round to a remembered one's (see [`Record::index`]).
const REINDEX_EVERY: u64 = 1 << 31;

/// Remembered uids, oldest first, bounded in bytes: past `max_bytes` the
/// oldest are forgotten early, so a client flooding unlocks cannot grow the
/// server without bound. Forgetting early only weakens the protection for
/// the oldest releases, whose stale requests are the least likely to still
/// be in flight.
///
/// Kept for speed on the lock path, where every grant looks a uid up
/// (nearly always one not remembered) and every release remembers one and,
/// once the bound is reached, forgets the oldest: with the record of a
/// busy locker far larger than the processor's caches, each memory access
/// there can cost as much as the rest of the call. So the uids are kept in
/// queues in the order they were remembered and found through an index of
/// 8-byte slots; forgetting the oldest reads only the front of a queue of
/// 16-byte stamps and leaves its index slot to be reused or dropped later.
/// A look-up of a uid not remembered reads one or two slots of the index.
///
/// The uids whose entries were forced open (by an admin, by uid or by
/// name) are kept apart, in a second record of at most half of
/// `max_bytes`, and only a newer force forgets one early: a client may
/// release as many uids as it likes, held or not (a release may overtake
/// the lock it releases, so a release of a uid nobody holds is remembered
/// too), but that pushes out releases only, never a forced uid, whose
/// refreshes, locks and waits stay refused for the whole ttl. A look-up
/// reads the forced uids' index only while that record holds a uid
/// (rarely: forcing a lock open is an admin's act), so a grant still
/// reads one index.
pub(crate) struct Released {
    /// The clock the ttl is measured on: the locker's own, so that a
    /// locker whose clock runs slow keeps a release for its own validity.
    clock: Clock,
    /// The stamps are nanoseconds after this instant of `clock`.
    epoch: Instant,
    /// Keyed with a per-record seed (as the lock table's maps are): the
    /// uids come from clients. Hashed before the mutex is taken.
    hasher: foldhash::fast::RandomState,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    ttl: Duration,
    max_bytes: usize,
    /// Uids released (or whose lock was refused after its release).
    ordinary: Record,
    /// Uids forced open, in at most half of `max_bytes`.
    forced: Record,
}

/// One list of remembered uids, oldest first, and its index.
#[derive(Default)]
struct Record {
    /// Oldest first, in the order of their times: the uid numbered
    /// `first + i` (wrapping) is at `i`, here and in `uids`.
    order: VecDeque<Stamp>,
    /// The first [`INLINE`] bytes of each uid in `order`.
    uids: VecDeque<[u8; INLINE]>,
    /// The uids longer than [`INLINE`] bytes, with their numbers, oldest
    /// first.
    long: VecDeque<(u32, Arc<str>)>,
    first: u32,
    /// Linear probing over a power-of-two number of slots: 0 for an empty
    /// slot, else a uid's [`tag`] in the high half and its number in the
    /// low half. A slot whose number is no longer in `order` belongs to a
    /// forgotten uid: it ends no probe (it is not 0), an insertion may
    /// reuse it, and a rebuild drops it. At most half the slots hold
    /// remembered uids and at most three quarters are used (by remembered
    /// uids or forgotten ones), so that a probe always ends and ends soon;
    /// past either the index is rebuilt, and it is rebuilt at least every
    /// [`REINDEX_EVERY`] forgotten uids, so that a forgotten uid's number
    /// is never taken for a remembered one's.
    index: Vec<u64>,
    /// Slots of `index` that are not 0.
    used: usize,
    /// Uids forgotten since the index was last rebuilt.
    forgotten: u64,
    /// Sum of [`tombstone_bytes`] over `order`.
    bytes: usize,
}

/// One remembered uid, but its bytes.
#[derive(Clone, Copy)]
struct Stamp {
    /// When it was released: nanoseconds after the record's epoch.
    at: u64,
    /// Its [`tag`], as its index slot holds it.
    tag: u32,
    /// Its length in bytes.
    len: u32,
}

/// The high half of a uid's index slot: the low 32 bits of its hash, with
/// the top bit set so that no used slot is 0. Its low bits are the uid's
/// home slot (the index has at most 2^32 slots, see [`MAX_UIDS`]).
fn tag(hash: u64) -> u32 {
    (hash as u32) | (1 << 31)
}

/// Nanoseconds in `d`, saturating.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Released {
    #[cfg(test)]
    pub(crate) fn new(ttl: Duration, max_bytes: usize) -> Self {
        Self::on_clock(ttl, max_bytes, Clock::Tokio)
    }

    /// As [`new`](Self::new), measuring the ttl on `clock`.
    pub(crate) fn on_clock(ttl: Duration, max_bytes: usize, clock: Clock) -> Self {
        Released {
            epoch: clock.now(),
            clock,
            hasher: foldhash::fast::RandomState::default(),
            inner: Mutex::new(Inner {
                ttl,
                max_bytes,
                ..Inner::default()
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `now` as the record keeps times: nanoseconds after its epoch.
    fn since_epoch(&self, now: Instant) -> u64 {
        nanos(now.saturating_duration_since(self.epoch))
    }

    /// Bytes currently counted against the bound.
    #[cfg_attr(not(feature = "net"), allow(dead_code))]
    pub(crate) fn bytes(&self) -> usize {
        self.lock().bytes()
    }

    /// How many uids are remembered and their bytes, after forgetting
    /// those past the ttl (which otherwise go only as new ones come).
    #[cfg_attr(not(all(feature = "net", feature = "metrics")), allow(dead_code))]
    pub(crate) fn usage(&self) -> (usize, usize) {
        let now = self.since_epoch(self.clock.now());
        let mut inner = self.lock();
        inner.forget_older_than(now);
        let count = inner.ordinary.order.len() + inner.forced.order.len();
        (count, inner.bytes())
    }

    #[cfg_attr(not(feature = "net"), allow(dead_code))]
    pub(crate) fn remember(&self, uid: &str) {
        self.remember_with(uid, false, self.clock.now(), || uid.into());
    }

    /// As [`remember`](Self::remember), sharing the caller's string (no
    /// allocation but the structures' own growth), and released at `now`:
    /// the caller's own reading of this record's clock, taken for the call
    /// that releases (the time the table gives everything else that call
    /// does). It is remembered for the ttl from then at least.
    pub(crate) fn remember_shared_at(&self, uid: &Arc<str>, now: Instant) {
        self.remember_with(uid, false, now, || uid.clone());
    }

    /// Remembers that `uid` was forced open, apart from the releases, so
    /// that no flood of releases forgets it early.
    #[cfg_attr(not(feature = "net"), allow(dead_code))]
    pub(crate) fn remember_forced(&self, uid: &Arc<str>) {
        self.remember_forced_at(uid, self.clock.now());
    }

    /// As [`remember_forced`](Self::remember_forced), forced open at
    /// `now` (as for [`remember_shared_at`](Self::remember_shared_at)).
    pub(crate) fn remember_forced_at(&self, uid: &Arc<str>, now: Instant) {
        self.remember_with(uid, true, now, || uid.clone());
    }

    fn remember_with(
        &self,
        uid: &str,
        forced: bool,
        now: Instant,
        shared: impl FnOnce() -> Arc<str>,
    ) {
        if uid.is_empty() {
            return;
        }
        let hash = self.hasher.hash_one(uid);
        let now = self.since_epoch(now);
        let mut inner = self.lock();
        inner.remember(uid, hash, forced, now, shared);
    }
}

impl Inner {
    fn remember(
        &mut self,
        uid: &str,
        hash: u64,
        forced: bool,
        now: u64,
        shared: impl FnOnce() -> Arc<str>,
    ) {
        let inner = self;
        inner.forget_older_than(now);
        // A uid forced open is refused already; one released and then
        // forced is kept among the forced too, where releases cannot reach.
        if inner.forced.find(uid, hash).is_some()
            || (!forced && inner.ordinary.find(uid, hash).is_some())
        {
            return;
        }
        let bytes = tombstone_bytes(uid);
        let Inner {
            max_bytes,
            ordinary,
            forced: kept_forced,
            ..
        } = &mut *inner;
        if forced {
            // The forced keep within half the bound, the newest kept; one
            // larger than that is not kept at all (and makes none of the
            // others go).
            if !kept_forced.make_room(bytes, *max_bytes / 2) {
                return;
            }
            let at = kept_forced.stamp(now);
            kept_forced.push(uid, hash, at, shared);
            // Then releases make way for it, never a forced uid.
            let room = max_bytes.saturating_sub(kept_forced.bytes);
            ordinary.make_room(0, room);
        } else {
            // Releases keep within what the forced leave: one larger than
            // that is not kept at all.
            let room = max_bytes.saturating_sub(kept_forced.bytes);
            if !ordinary.make_room(bytes, room) {
                return;
            }
            let at = ordinary.stamp(now);
            ordinary.push(uid, hash, at, shared);
        }
    }
}

impl Released {
    /// Forgets every uid: the locker restarted, and forgot them with its
    /// table. The limits stay.
    pub(crate) fn clear(&self) {
        let mut inner = self.lock();
        *inner = Inner {
            ttl: inner.ttl,
            max_bytes: inner.max_bytes,
            ..Inner::default()
        };
    }

    /// Keeps uids for `ttl` and at most `max_bytes` of them from now on: a
    /// lock server sets its own limits on the record of the locker it
    /// serves, which then serves both.
    #[cfg_attr(not(feature = "net"), allow(dead_code))]
    pub(crate) fn set_limits(&self, ttl: Duration, max_bytes: usize) {
        let mut inner = self.lock();
        inner.ttl = ttl;
        inner.max_bytes = max_bytes;
        // The forced within half the bound, then the releases within what
        // they leave.
        inner.forced.make_room(0, max_bytes / 2);
        let room = max_bytes.saturating_sub(inner.forced.bytes);
        inner.ordinary.make_room(0, room);
    }

    /// Whether `uid` was released or forced open within the ttl.
    #[cfg_attr(not(feature = "net"), allow(dead_code))]
    pub(crate) fn contains(&self, uid: &str) -> bool {
        self.contains_at(uid, self.clock.now())
    }

    /// Whether `uid` was released or forced open within the ttl before
    /// `now`, the caller's own reading of this record's clock (a release
    /// stamped after it counts as within).
    pub(crate) fn contains_at(&self, uid: &str, now: Instant) -> bool {
        let hash = self.hasher.hash_one(uid);
        let now = self.since_epoch(now);
        let inner = self.lock();
        let ttl = nanos(inner.ttl);
        let live = |record: &Record| {
            record
                .find(uid, hash)
                .is_some_and(|pos| now.saturating_sub(record.order[pos].at) < ttl)
        };
        // The forced uids' index is read only while it holds one.
        live(&inner.ordinary) || (!inner.forced.order.is_empty() && live(&inner.forced))
    }
}

impl Inner {
    /// Bytes of both records, as counted against the bound.
    fn bytes(&self) -> usize {
        self.ordinary.bytes + self.forced.bytes
    }

    /// Forgets the uids of both records remembered `ttl` or more before
    /// `now`.
    fn forget_older_than(&mut self, now: u64) {
        let ttl = nanos(self.ttl);
        self.ordinary.forget_older_than(now, ttl);
        self.forced.forget_older_than(now, ttl);
    }
}

impl Record {
    fn forget_older_than(&mut self, now: u64, ttl: u64) {
        while let Some(oldest) = self.order.front() {
            if now.saturating_sub(oldest.at) < ttl {
                break;
            }
            self.forget_oldest();
        }
    }

    /// Forgets the oldest uids until one of `bytes` more fits within
    /// `max_bytes` (and [`MAX_UIDS`]); whether it does. When it could not
    /// fit even alone, none is forgotten.
    fn make_room(&mut self, bytes: usize, max_bytes: usize) -> bool {
        if bytes > max_bytes {
            return false;
        }
        let more = usize::from(bytes > 0);
        while self.bytes + bytes > max_bytes || self.order.len() + more > MAX_UIDS {
            if !self.forget_oldest() {
                break;
            }
        }
        true
    }

    /// The stamp for a uid remembered at `now`. Callers read the clock
    /// before they wait for the mutex, so a reading can be older than the
    /// newest remembered: stamped as that one instead, the queue stays in
    /// the order of the stamps (which forgetting relies on) and the uid is
    /// kept a little longer, never shorter.
    fn stamp(&self, now: u64) -> u64 {
        self.order.back().map_or(now, |newest| now.max(newest.at))
    }

    /// Forgets the oldest uid. Its index slot stays, as a forgotten uid's
    /// (see [`index`](Self::index)).
    fn forget_oldest(&mut self) -> bool {
        let Some(oldest) = self.order.pop_front() else {
            return false;
        };
        self.uids.pop_front();
        if oldest.len as usize > INLINE {
            self.long.pop_front();
        }
        self.first = self.first.wrapping_add(1);
        self.bytes -= oldest.len as usize + TOMBSTONE_OVERHEAD;
        self.forgotten += 1;
        if self.forgotten >= REINDEX_EVERY {
            self.reindex();
        }
        true
    }

    /// The queue position that the number in `slot` stands for, if that
    /// uid is still remembered.
    fn position(&self, slot: u64) -> Option<usize> {
        let pos = (slot as u32).wrapping_sub(self.first) as usize;
        (pos < self.order.len()).then_some(pos)
    }

    /// Whether the uid at queue position `pos` is `uid`.
    fn is_at(&self, pos: usize, uid: &str) -> bool {
        let len = self.order[pos].len as usize;
        if len != uid.len() {
            return false;
        }
        if len <= INLINE {
            return self.uids[pos][..len] == *uid.as_bytes();
        }
        let number = self.first.wrapping_add(pos as u32);
        let first = self.first;
        let at = self
            .long
            .partition_point(|(n, _)| n.wrapping_sub(first) < pos as u32);
        self.long
            .get(at)
            .is_some_and(|(n, long)| *n == number && **long == *uid)
    }

    /// The queue position of `uid`, whose hash is `hash`.
    fn find(&self, uid: &str, hash: u64) -> Option<usize> {
        if self.index.is_empty() {
            return None;
        }
        let tag = u64::from(tag(hash));
        let mask = self.index.len() - 1;
        let mut at = tag as usize & mask;
        loop {
            let slot = self.index[at];
            if slot == 0 {
                return None;
            }
            if slot >> 32 == tag
                && let Some(pos) = self.position(slot)
                && self.is_at(pos, uid)
            {
                return Some(pos);
            }
            at = (at + 1) & mask;
        }
    }

    /// Appends `uid` to the queues and the index, and counts its bytes.
    fn push(&mut self, uid: &str, hash: u64, at: u64, shared: impl FnOnce() -> Arc<str>) {
        self.bytes += tombstone_bytes(uid);
        let number = self.first.wrapping_add(self.order.len() as u32);
        let tag = tag(hash);
        let mut head = [0; INLINE];
        let len = uid.len().min(INLINE);
        head[..len].copy_from_slice(&uid.as_bytes()[..len]);
        self.order.push_back(Stamp {
            at,
            tag,
            len: uid.len() as u32,
        });
        self.uids.push_back(head);
        if uid.len() > INLINE {
            self.long.push_back((number, shared()));
        }
        if self.order.len() * 2 > self.index.len() || (self.used + 1) * 4 > self.index.len() * 3 {
            // Also indexes the new uid.
            self.reindex();
        } else {
            self.insert((u64::from(tag) << 32) | u64::from(number));
        }
    }

    /// Puts `slot` in the first slot from its home that is empty or a
    /// forgotten uid's.
    fn insert(&mut self, slot: u64) {
        let mask = self.index.len() - 1;
        let mut at = (slot >> 32) as usize & mask;
        loop {
            let old = self.index[at];
            if old == 0 {
                self.used += 1;
                break;
            }
            if self.position(old).is_none() {
                break;
            }
            at = (at + 1) & mask;
        }
        self.index[at] = slot;
    }

    /// Rebuilds the index for the remembered uids only, with 2 to 4 slots
    /// per uid (and at least [`INDEX_KEPT`]).
    fn reindex(&mut self) {
        let slots = (self.order.len() * 2 + 1)
            .next_power_of_two()
            .max(INDEX_KEPT);
        self.index.clear();
        self.index.resize(slots, 0);
        self.used = 0;
        self.forgotten = 0;
        for i in 0..self.order.len() {
            let number = self.first.wrapping_add(i as u32);
            self.insert((u64::from(self.order[i].tag) << 32) | u64::from(number));
        }
    }
}

#[cfg(test)]
mod tests;
