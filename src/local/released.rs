//! The uids a locker released recently. A lock, a wait in line or a
//! refresh for one of them can only be a message that was overtaken by its
//! own release (across a reconnect, a call delayed on its way past its
//! caller's deadline, a waiter's re-check sent before it gave up), so it
//! is refused instead of leaving an entry nobody will unlock. A
//! `LocalLocker` keeps one; a lock server serving it uses the same record,
//! with the server's limits.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::quorum::clock::Clock;

/// What one remembered uid costs besides its bytes, at most, while the
/// structures grow: the shared string's counts with the allocator's header
/// and rounding (about 32); its map slot (key and time, 32 bytes, and a
/// control byte) at the map's sparsest: remembering and forgetting in turn
/// leaves deleted slots behind, and once they fill the map it grows to
/// twice its buckets when a little under half its room is taken (7/16 of
/// the buckets), so at most 32/7 buckets per uid, and 48/7 (226 bytes)
/// while both tables are alive during the copy; its queue slot (32 bytes)
/// while a full queue is copied into one twice its size (96). That is
/// about 354. Measured (`tests/net_memory.rs`), the cost varies with the
/// map's hash seed from run to run, and reached 443 (a CI run: 1.10 MiB
/// for about 2,330 uids of 50 bytes, against a 1 MiB bound when 400 was
/// counted); 512 leaves a sixth to spare. Counting less (96, 241, 400) let
/// the remembered uids take more than their bound.
pub(crate) const TOMBSTONE_OVERHEAD: usize = 512;

/// What remembering `uid` costs, in bytes, as counted against the bound.
pub(crate) fn tombstone_bytes(uid: &str) -> usize {
    uid.len() + TOMBSTONE_OVERHEAD
}

/// Remembered uids, oldest first, bounded in bytes: past `max_bytes` the
/// oldest are forgotten early, so a client flooding unlocks cannot grow the
/// server without bound. Forgetting early only weakens the protection for
/// the oldest releases, whose stale requests are the least likely to still
/// be in flight.
///
/// The uids whose entries were forced open (by an admin, by uid or by
/// name) are kept apart, in at most half of `max_bytes`, and only a newer
/// force forgets one early: a client may release as many uids as it likes,
/// held or not (a release may overtake the lock it releases, so a release
/// of a uid nobody holds is remembered too), but that pushes out releases
/// only, never a forced uid, whose refreshes, locks and waits stay refused
/// for the whole ttl.
pub(crate) struct Released {
    /// The clock the ttl is measured on: the locker's own, so that a
    /// locker whose clock runs slow keeps a release for its own validity.
    clock: Clock,
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

/// One list of remembered uids, oldest first.
#[derive(Default)]
struct Record {
    /// Keyed with a per-map seed (as the lock table's maps are): the uids
    /// come from clients, and SipHash here cost a lock and unlock in
    /// process about 40% of its rate.
    since: HashMap<Arc<str>, Instant, foldhash::fast::RandomState>,
    order: VecDeque<(Instant, Arc<str>)>,
    /// Sum of [`tombstone_bytes`] over `order`.
    bytes: usize,
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
            inner: Mutex::new(Inner {
                ttl,
                max_bytes,
                ..Inner::default()
            }),
        }
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes currently counted against the bound.
    #[cfg_attr(not(feature = "net"), allow(dead_code))]
    pub(crate) fn bytes(&self) -> usize {
        self.inner().bytes()
    }

    /// How many uids are remembered and their bytes, after forgetting
    /// those past the ttl (which otherwise go only as new ones come).
    #[cfg_attr(not(all(feature = "net", feature = "metrics")), allow(dead_code))]
    pub(crate) fn usage(&self) -> (usize, usize) {
        let mut inner = self.inner();
        inner.forget_expired(self.clock.now());
        let count = inner.ordinary.order.len() + inner.forced.order.len();
        (count, inner.bytes())
    }

    #[cfg_attr(not(feature = "net"), allow(dead_code))]
    pub(crate) fn remember(&self, uid: &str) {
        self.remember_with(uid, false, || uid.into());
    }

    /// As [`remember`](Self::remember), sharing the caller's string: no
    /// allocation but the structures' own growth.
    pub(crate) fn remember_shared(&self, uid: &Arc<str>) {
        self.remember_with(uid, false, || uid.clone());
    }

    /// Remembers that `uid` was forced open, apart from the releases, so
    /// that no flood of releases forgets it early.
    pub(crate) fn remember_forced(&self, uid: &Arc<str>) {
        self.remember_with(uid, true, || uid.clone());
    }

    fn remember_with(&self, uid: &str, forced: bool, shared: impl FnOnce() -> Arc<str>) {
        if uid.is_empty() {
            return;
        }
        let now = self.clock.now();
        let mut inner = self.inner();
        inner.forget_expired(now);
        // A uid forced open is refused already; one released and then
        // forced is kept among the forced too, where releases cannot reach.
        if inner.forced.since.contains_key(uid)
            || (!forced && inner.ordinary.since.contains_key(uid))
        {
            return;
        }
        let record = if forced {
            &mut inner.forced
        } else {
            &mut inner.ordinary
        };
        record.push(shared(), now);
        inner.fit(forced);
    }

    /// Forgets every uid: the locker restarted, and forgot them with its
    /// table. The limits stay.
    pub(crate) fn clear(&self) {
        let mut inner = self.inner();
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
        let mut inner = self.inner();
        inner.ttl = ttl;
        inner.max_bytes = max_bytes;
        inner.fit(true);
    }

    pub(crate) fn contains(&self, uid: &str) -> bool {
        let inner = self.inner();
        let now = self.clock.now();
        let live = |at: &Instant| now.saturating_duration_since(*at) < inner.ttl;
        inner.ordinary.since.get(uid).is_some_and(live)
            || inner.forced.since.get(uid).is_some_and(live)
    }
}

impl Inner {
    fn bytes(&self) -> usize {
        self.ordinary.bytes + self.forced.bytes
    }

    fn forget_expired(&mut self, now: Instant) {
        let ttl = self.ttl;
        self.ordinary.forget_older_than(now, ttl);
        self.forced.forget_older_than(now, ttl);
    }

    /// Brings the records within their bounds after a uid was added (a
    /// forced one when `forced`): the forced within half of `max_bytes`,
    /// forgetting their oldest; then both within `max_bytes`, forgetting
    /// the oldest releases. A release never forgets a forced uid.
    fn fit(&mut self, forced: bool) {
        if forced {
            while self.forced.bytes > self.max_bytes / 2 && self.forced.forget_oldest() {}
        }
        while self.bytes() > self.max_bytes && self.ordinary.forget_oldest() {}
    }
}

impl Record {
    fn push(&mut self, uid: Arc<str>, now: Instant) {
        self.bytes += tombstone_bytes(&uid);
        self.since.insert(uid.clone(), now);
        self.order.push_back((now, uid));
    }

    fn forget_older_than(&mut self, now: Instant, ttl: Duration) {
        while let Some((at, _)) = self.order.front() {
            if now.saturating_duration_since(*at) < ttl {
                break;
            }
            self.forget_oldest();
        }
    }

    fn forget_oldest(&mut self) -> bool {
        let Some((_, uid)) = self.order.pop_front() else {
            return false;
        };
        self.since.remove(&uid);
        self.bytes -= tombstone_bytes(&uid);
        true
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
            inner.ordinary.order.len(),
            1,
            "expired uids must be dropped, not kept"
        );
        assert_eq!(inner.bytes(), tombstone_bytes("b"));
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
        assert_eq!(released.inner.lock().unwrap().ordinary.order.len(), 100);
        // One uid larger than the whole budget is not kept at all.
        released.remember(&"x".repeat(budget));
        assert!(released.bytes() <= budget);
    }

    /// A flood of releases (of uids held or not) forgets older releases
    /// only: a uid forced open stays refused for the ttl. Forced uids keep
    /// within half the bound, the newest kept.
    #[tokio::test(start_paused = true)]
    async fn releases_never_push_out_a_forced_uid() {
        let budget = 100 * tombstone_bytes("uid-00000");
        let released = Released::new(Duration::from_secs(60), budget);
        released.remember_forced(&Arc::from("forced-0"));
        released.remember("uid-released");
        released.remember_forced(&Arc::from("uid-released"));
        for i in 0..1_000 {
            released.remember(&format!("uid-{i:05}"));
            assert!(released.bytes() <= budget);
        }
        assert!(released.contains("forced-0"));
        assert!(released.contains("uid-released"), "released, then forced");
        assert!(!released.contains("uid-00000"));
        for i in 0..1_000 {
            released.remember_forced(&Arc::from(format!("forced-{i:03}")));
            assert!(released.bytes() <= budget);
        }
        {
            let inner = released.inner.lock().unwrap();
            assert!(inner.forced.bytes <= budget / 2);
            assert!(inner.forced.since.contains_key("forced-999"));
            assert!(!inner.ordinary.order.is_empty(), "releases keep room");
        }
        tokio::time::sleep(Duration::from_secs(61)).await;
        assert!(!released.contains("forced-999"), "kept for the ttl only");
        assert_eq!(released.usage(), (0, 0));
    }
}
