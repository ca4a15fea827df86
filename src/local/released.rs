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
/// against the bound, while the structures grow: the record keeps 64
/// bytes per uid in its queue (time, hash, and the uid itself when it has
/// at most [`INLINE`] bytes, else a share of the caller's string), which
/// doubles when full (3 slots per uid, 192 bytes, while a full queue is
/// copied into one twice its size), and 8 bytes per slot of its index,
/// which doubles past half full (6 slots per uid, 48 bytes, while it is
/// rebuilt: 2 old and 4 new). A longer uid's own string, when the record
/// keeps the last share of it, is its length and the counts and malloc's
/// header and rounding (about 40). That is about 280 besides the uid's
/// length. Neither structure shrinks (as the record before this one),
/// so after a peak they keep the room the peak's uids were counted for.
/// 512 is counted, as for the record before this one (a map of shared
/// strings, which measured up to 443 in `tests/net_memory.rs`), so that
/// the same uids are remembered under the same limits; counting less
/// would let more be kept.
pub(crate) const TOMBSTONE_OVERHEAD: usize = 512;

/// What remembering `uid` costs, in bytes, as counted against the bound.
pub(crate) fn tombstone_bytes(uid: &str) -> usize {
    uid.len() + TOMBSTONE_OVERHEAD
}

/// The longest uid the record copies into its own queue rather than share:
/// the library's uids (36 bytes) fit, so that forgetting one touches
/// nothing but the queue's front and one slot of the index.
const INLINE: usize = 38;

/// The most uids the record keeps, whatever its limits: its index numbers
/// them in 32 bits (at 512 bytes and more each, that is 512 GiB).
const MAX_UIDS: usize = 1 << 30;

/// The fewest slots of the index.
const INDEX_KEPT: usize = 128;

/// Remembered uids, oldest first, bounded in bytes: past `max_bytes` the
/// oldest are forgotten early, so a client flooding unlocks cannot grow the
/// server without bound. Forgetting early only weakens the protection for
/// the oldest releases, whose stale requests are the least likely to still
/// be in flight.
///
/// The uids are kept in a queue in the order they were remembered, and
/// found through an index of small slots (a linear-probing hash table of
/// queue positions): a look-up of a uid not remembered, the common case,
/// reads one or two slots of the index, and forgetting the oldest reads
/// the queue's front and removes its one slot. The old record (a map of
/// shared strings beside a queue of them) read a map slot and the
/// forgotten uid's string on every release, most of them cache misses.
pub(crate) struct Released {
    /// The clock the ttl is measured on: the locker's own, so that a
    /// locker whose clock runs slow keeps a release for its own validity.
    clock: Clock,
    /// Keyed with a per-record seed (as the lock table's maps are): the
    /// uids come from clients. Hashed before the mutex is taken.
    hasher: foldhash::fast::RandomState,
    inner: Mutex<Inner>,
}

struct Inner {
    ttl: Duration,
    max_bytes: usize,
    /// Oldest first, in the order of their stamps: the uid numbered
    /// `first + i` (wrapping) is at `i`.
    order: VecDeque<Tombstone>,
    first: u32,
    /// Linear probing over a power-of-two number of slots, at most half of
    /// them used, so that a probe always ends: 0 for an empty slot, else
    /// the uid's [`tag`] in the high half and its number in the low half.
    index: Vec<u64>,
    /// Sum of [`tombstone_bytes`] over `order`.
    bytes: usize,
}

struct Tombstone {
    /// When it was released, on the record's clock.
    at: Instant,
    hash: u64,
    uid: Uid,
}

enum Uid {
    Inline { len: u8, bytes: [u8; INLINE] },
    Shared(Arc<str>),
}

impl Uid {
    fn new(uid: &str, shared: impl FnOnce() -> Arc<str>) -> Uid {
        match u8::try_from(uid.len()) {
            Ok(len) if uid.len() <= INLINE => {
                let mut bytes = [0; INLINE];
                bytes[..uid.len()].copy_from_slice(uid.as_bytes());
                Uid::Inline { len, bytes }
            }
            _ => Uid::Shared(shared()),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            Uid::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Uid::Shared(uid) => uid.as_bytes(),
        }
    }
}

/// The high half of a uid's index slot: the low 32 bits of its hash, with
/// the top bit set so that no used slot is 0. Its low bits are the uid's
/// home slot (the index has at most 2^31 slots, see [`MAX_UIDS`]).
fn tag(hash: u64) -> u64 {
    (hash & 0xffff_ffff) | (1 << 31)
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            ttl: Duration::ZERO,
            max_bytes: 0,
            order: VecDeque::new(),
            first: 0,
            index: Vec::new(),
            bytes: 0,
        }
    }
}

impl Released {
    #[cfg(test)]
    pub(crate) fn new(ttl: Duration, max_bytes: usize) -> Self {
        Self::on_clock(ttl, max_bytes, Clock::Tokio)
    }

    /// As [`new`](Self::new), measuring the ttl on `clock`.
    pub(crate) fn on_clock(ttl: Duration, max_bytes: usize, clock: Clock) -> Self {
        Released {
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

    /// Bytes currently counted against the bound.
    #[cfg_attr(not(feature = "net"), allow(dead_code))]
    pub(crate) fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// How many uids are remembered and their bytes, after forgetting
    /// those past the ttl (which otherwise go only as new ones come).
    #[cfg_attr(not(all(feature = "net", feature = "metrics")), allow(dead_code))]
    pub(crate) fn usage(&self) -> (usize, usize) {
        let now = self.clock.now();
        let mut inner = self.lock();
        inner.forget_older_than(now);
        (inner.order.len(), inner.bytes)
    }

    #[cfg_attr(not(feature = "net"), allow(dead_code))]
    pub(crate) fn remember(&self, uid: &str) {
        self.remember_with(uid, self.clock.now(), || uid.into());
    }

    /// As [`remember`](Self::remember), sharing the caller's string (no
    /// allocation but the structures' own growth), and released at `now`:
    /// the caller's own reading of this record's clock, taken for the call
    /// that releases (the time the table gives everything else that call
    /// does). It is remembered for the ttl from then at least.
    pub(crate) fn remember_shared_at(&self, uid: &Arc<str>, now: Instant) {
        self.remember_with(uid, now, || uid.clone());
    }

    fn remember_with(&self, uid: &str, now: Instant, shared: impl FnOnce() -> Arc<str>) {
        if uid.is_empty() {
            return;
        }
        let hash = self.hasher.hash_one(uid);
        let mut inner = self.lock();
        inner.forget_older_than(now);
        if inner.find(uid, hash).is_some() {
            return;
        }
        // Callers read the clock before they wait for the mutex, so a
        // reading can be older than the newest remembered: stamped as
        // that one instead, the queue stays in the order of the stamps
        // (which forgetting relies on) and the uid is kept a little
        // longer, never shorter.
        let at = inner.order.back().map_or(now, |newest| now.max(newest.at));
        let bytes = tombstone_bytes(uid);
        // Room first: the new uid is never the one forgotten for it, but
        // one larger than the whole bound is not kept at all.
        if bytes > inner.max_bytes {
            return;
        }
        while inner.bytes + bytes > inner.max_bytes || inner.order.len() >= MAX_UIDS {
            if !inner.forget_oldest() {
                break;
            }
        }
        inner.push(Tombstone {
            at,
            hash,
            uid: Uid::new(uid, shared),
        });
        inner.bytes += bytes;
    }

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
        while inner.bytes > inner.max_bytes {
            if !inner.forget_oldest() {
                break;
            }
        }
    }

    /// Whether `uid` was released within the ttl.
    #[cfg_attr(not(feature = "net"), allow(dead_code))]
    pub(crate) fn contains(&self, uid: &str) -> bool {
        self.contains_at(uid, self.clock.now())
    }

    /// Whether `uid` was released within the ttl before `now`, the
    /// caller's own reading of this record's clock (a release stamped
    /// after it counts as within).
    pub(crate) fn contains_at(&self, uid: &str, now: Instant) -> bool {
        let hash = self.hasher.hash_one(uid);
        let inner = self.lock();
        inner
            .find(uid, hash)
            .is_some_and(|at| now.saturating_duration_since(inner.order[at].at) < inner.ttl)
    }
}

impl Inner {
    fn forget_older_than(&mut self, now: Instant) {
        while let Some(oldest) = self.order.front() {
            if now.saturating_duration_since(oldest.at) < self.ttl {
                break;
            }
            self.forget_oldest();
        }
    }

    fn forget_oldest(&mut self) -> bool {
        let Some(oldest) = self.order.pop_front() else {
            return false;
        };
        self.unindex((tag(oldest.hash) << 32) | u64::from(self.first));
        self.first = self.first.wrapping_add(1);
        self.bytes -= oldest.uid.as_bytes().len() + TOMBSTONE_OVERHEAD;
        true
    }

    fn mask(&self) -> usize {
        self.index.len() - 1
    }

    /// The queue position of `uid`, whose hash is `hash`.
    fn find(&self, uid: &str, hash: u64) -> Option<usize> {
        if self.index.is_empty() {
            return None;
        }
        let tag = tag(hash);
        let mask = self.mask();
        let mut at = tag as usize & mask;
        loop {
            let slot = self.index[at];
            if slot == 0 {
                return None;
            }
            if slot >> 32 == tag {
                let pos = (slot as u32).wrapping_sub(self.first) as usize;
                if self.order[pos].uid.as_bytes() == uid.as_bytes() {
                    return Some(pos);
                }
            }
            at = (at + 1) & mask;
        }
    }

    /// Appends `tombstone` to the queue and the index.
    fn push(&mut self, tombstone: Tombstone) {
        let number = self.first.wrapping_add(self.order.len() as u32);
        let slot = (tag(tombstone.hash) << 32) | u64::from(number);
        self.order.push_back(tombstone);
        if self.order.len() * 2 > self.index.len() {
            // Also indexes the new uid.
            self.reindex();
        } else {
            self.insert(slot);
        }
    }

    fn insert(&mut self, slot: u64) {
        let mask = self.mask();
        let mut at = (slot >> 32) as usize & mask;
        while self.index[at] != 0 {
            at = (at + 1) & mask;
        }
        self.index[at] = slot;
    }

    /// Removes `slot`, which the index holds, shifting back the slots
    /// after it that probed past it, so that no probe meets a gap early.
    fn unindex(&mut self, slot: u64) {
        let mask = self.mask();
        let mut hole = (slot >> 32) as usize & mask;
        while self.index[hole] != slot {
            hole = (hole + 1) & mask;
        }
        let mut at = hole;
        loop {
            at = (at + 1) & mask;
            let next = self.index[at];
            if next == 0 {
                break;
            }
            let home = (next >> 32) as usize & mask;
            // `next` may fill the hole when the hole lies between its
            // home and where it sits.
            if at.wrapping_sub(home) & mask >= at.wrapping_sub(hole) & mask {
                self.index[hole] = next;
                hole = at;
            }
        }
        self.index[hole] = 0;
    }

    /// Rebuilds the index for the queue, with more than 2 slots per uid
    /// (at most 4 past [`INDEX_KEPT`]).
    fn reindex(&mut self) {
        let slots = (self.order.len() * 2 + 1)
            .next_power_of_two()
            .max(INDEX_KEPT);
        self.index = vec![0; slots];
        for i in 0..self.order.len() {
            let number = self.first.wrapping_add(i as u32);
            self.insert((tag(self.order[i].hash) << 32) | u64::from(number));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn remembers_for_the_ttl_only() {
        let released = Released::new(Duration::from_secs(60), 1 << 20);
        released.remember("a");
        assert!(released.contains("a"));
        assert!(!released.contains("b"));
        tokio::time::sleep(Duration::from_secs(61)).await;
        assert!(!released.contains("a"));
        released.remember("b");
        let inner = released.inner.lock().unwrap();
        assert_eq!(
            inner.order.len(),
            1,
            "expired uids must be dropped, not kept"
        );
        assert_eq!(inner.bytes, tombstone_bytes("b"));
    }

    #[tokio::test(start_paused = true)]
    async fn usage_counts_the_live_tombstones_only() {
        let released = Released::new(Duration::from_secs(60), 1 << 20);
        assert_eq!(released.usage(), (0, 0));
        released.remember("b");
        released.remember("c");
        tokio::time::sleep(Duration::from_secs(30)).await;
        released.remember("dd");
        let three = 2 * tombstone_bytes("b") + tombstone_bytes("dd");
        assert_eq!(released.usage(), (3, three));
        tokio::time::sleep(Duration::from_secs(31)).await;
        // "b" and "c" are past the ttl: counting forgets them, "dd" stays.
        assert_eq!(released.usage(), (1, tombstone_bytes("dd")));
    }

    /// Issue #9: a 2 MB uid left a 1.9 MiB tombstone and a million were
    /// kept. Now the total is bounded in bytes, and the oldest go first.
    #[tokio::test(start_paused = true)]
    async fn total_bytes_are_bounded_and_the_oldest_are_forgotten_first() {
        let budget = 100 * tombstone_bytes("uid-00000");
        let released = Released::new(Duration::from_secs(60), budget);
        for i in 0..1_000 {
            released.remember(&format!("uid-{i:05}"));
            assert!(released.bytes() <= budget);
        }
        assert!(released.contains("uid-00999"));
        assert!(released.contains("uid-00900"));
        assert!(!released.contains("uid-00899"));
        assert_eq!(released.inner.lock().unwrap().order.len(), 100);
        // One uid larger than the whole budget is not kept at all.
        released.remember(&"x".repeat(budget));
        assert!(released.bytes() <= budget);
    }

    /// The record against a plain model of it (a map and a queue of
    /// strings, as it was kept before its index): random uids, short and
    /// long, many of them sharing their index's home slots, remembered,
    /// looked up and forgotten by age and by bytes, with the limits
    /// changed now and then.
    #[tokio::test(start_paused = true)]
    async fn agrees_with_a_plain_model() {
        use std::collections::HashMap;

        struct Model {
            ttl: Duration,
            max_bytes: usize,
            since: HashMap<String, Instant>,
            order: VecDeque<(Instant, String)>,
            bytes: usize,
        }
        impl Model {
            fn forget_oldest(&mut self) {
                let (_, uid) = self.order.pop_front().expect("one to forget");
                self.since.remove(&uid);
                self.bytes -= tombstone_bytes(&uid);
            }
            fn forget_older_than(&mut self, now: Instant) {
                while self
                    .order
                    .front()
                    .is_some_and(|(at, _)| now.saturating_duration_since(*at) >= self.ttl)
                {
                    self.forget_oldest();
                }
            }
            fn remember(&mut self, uid: &str, now: Instant) {
                self.forget_older_than(now);
                if self.since.contains_key(uid) || tombstone_bytes(uid) > self.max_bytes {
                    return;
                }
                while self.bytes + tombstone_bytes(uid) > self.max_bytes {
                    self.forget_oldest();
                }
                self.since.insert(uid.to_owned(), now);
                self.order.push_back((now, uid.to_owned()));
                self.bytes += tombstone_bytes(uid);
            }
            fn contains(&self, uid: &str, now: Instant) -> bool {
                self.since
                    .get(uid)
                    .is_some_and(|at| now.saturating_duration_since(*at) < self.ttl)
            }
        }

        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |below: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below
        };
        let ttl = Duration::from_secs(10);
        let max_bytes = 300 * tombstone_bytes("uid-0000");
        let released = Released::new(ttl, max_bytes);
        let mut model = Model {
            ttl,
            max_bytes,
            since: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
        };
        let uid = |n: u64| {
            if n % 7 == 0 {
                format!("{}-{n}", "long".repeat(12))
            } else {
                format!("uid-{n:04}")
            }
        };
        for step in 0..60_000 {
            let now = Instant::now();
            match next(100) {
                0..=44 => {
                    let u = uid(next(2_000));
                    if next(2) == 0 {
                        released.remember(&u);
                    } else {
                        released.remember_shared_at(&Arc::from(u.as_str()), now);
                    }
                    model.remember(&u, now);
                }
                45..=94 => {
                    let u = uid(next(2_000));
                    assert_eq!(
                        released.contains(&u),
                        model.contains(&u, now),
                        "step {step}: {u}"
                    );
                }
                95..=97 => tokio::time::advance(Duration::from_millis(next(400))).await,
                98 => {
                    let max_bytes = (100 + next(400) as usize) * tombstone_bytes("uid-0000");
                    released.set_limits(ttl, max_bytes);
                    model.max_bytes = max_bytes;
                    while model.bytes > max_bytes {
                        model.forget_oldest();
                    }
                }
                _ => {
                    let (uids, bytes) = released.usage();
                    model.forget_older_than(now);
                    assert_eq!(
                        (uids, bytes),
                        (model.order.len(), model.bytes),
                        "step {step}"
                    );
                }
            }
            assert_eq!(released.bytes(), model.bytes, "step {step}");
        }
        let inner = released.inner.lock().unwrap();
        assert_eq!(inner.order.len(), model.order.len());
        // Every remembered uid is in the index once, and no probe meets a
        // gap before it.
        assert_eq!(
            inner.index.iter().filter(|&&s| s != 0).count(),
            inner.order.len()
        );
        for (i, t) in inner.order.iter().enumerate() {
            let u = std::str::from_utf8(t.uid.as_bytes()).unwrap();
            assert_eq!(inner.find(u, t.hash), Some(i));
        }
    }

    /// A release stamped with a clock reading older than the newest one
    /// remembered (its caller read the clock, then waited for the mutex)
    /// is kept for the ttl after the newest.
    #[tokio::test(start_paused = true)]
    async fn an_older_reading_is_stamped_as_the_newest() {
        let ttl = Duration::from_secs(60);
        let released = Released::new(ttl, 1 << 20);
        let before = Instant::now();
        tokio::time::advance(Duration::from_secs(5)).await;
        released.remember("newer");
        released.remember_shared_at(&Arc::from("older"), before);
        tokio::time::advance(ttl - Duration::from_secs(1)).await;
        assert!(released.contains("older"));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(!released.contains("older"));
        assert!(!released.contains("newer"));
    }

    #[test]
    fn a_tombstone_takes_one_cache_line() {
        assert!(std::mem::size_of::<Tombstone>() <= 64);
    }
}
