//! The uids a `LocalLocker` in quarantine released or was forced to give
//! up, so that a refresh arriving late cannot bring them back.
//!
//! In quarantine a refresh that names its mode re-creates its missing
//! entries where the names are free (see `refresh_entries`): after a
//! restart that is how a live holder gets its entries back. But a refresh
//! sent before a release can arrive after it (a slow link, a call that
//! was retried), and re-creating the entries then would undo a release the
//! holder was told had succeeded: a resigned leader's copy would come back,
//! and with one leftover copy elsewhere stand on a write quorum again.
//!
//! Invariants:
//! * a uid released here, or whose entries were forced open here (by uid
//!   or by name), during the current quarantine is never re-created by a
//!   refresh before that quarantine ends (after it, refreshes re-create
//!   nothing); a later holder of a forced name is, as any holder;
//! * it is recorded once the call's arguments were found valid (a refused
//!   call leaves nothing behind), before the release removes anything and
//!   under the same shard locks, so a refresh racing the release cannot
//!   slip in between;
//! * it is forgotten by the first expiry sweep a validity after its
//!   quarantine ended: a refresh that read the clock just before the end
//!   may still be deciding whether to re-create, and must find the record;
//!   a restart meanwhile starts a record of its own, which stays;
//! * the uids forced open are kept apart from the releases, in at most
//!   half of [`MAX_ENDED_BYTES`], and only a newer force forgets one
//!   early: a client may release as many uids as it likes (held or not),
//!   but that never pushes out a uid an admin forced open. (They also go
//!   to the locker's forced uids in `released.rs`, as outside quarantine.)
//! * the record is bounded by [`MAX_ENDED_BYTES`]: past it, the oldest
//!   releases are forgotten first. Refusing every re-creation instead would
//!   cost live holders their entry here, and a rolling restart (the next
//!   server restarted once this one is out of quarantine) their lock. What
//!   the bound gives up is a refresh delayed past about 40,000 later
//!   releases of the library's own 36-byte uids on this locker (29,000 of
//!   128-byte ones); the transports deliver one connection's
//!   calls in order (TCP), so a refresh reaches a locker after its own
//!   release only when a reconnect overtakes it, which is far quicker.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The most the record keeps, counting each uid as its length plus
/// [`ENTRY_COST`] bytes.
pub(crate) const MAX_ENDED_BYTES: usize = 8 << 20;

/// What one recorded uid costs besides its bytes, at most: its
/// string's counts and the allocator's rounding and header (40), its slot
/// in the set (hashbrown with at most 7/8 of its buckets used, just grown:
/// about 40) and in the queue (24 bytes, up to twice that just grown: 48),
/// with room to spare.
const ENTRY_COST: usize = 160;

#[derive(Debug, Default)]
struct Record {
    /// The quarantine the record belongs to (its end, as the locker keeps
    /// it): a record of another quarantine is stale.
    quarantine_end: u64,
    /// The uids released.
    released: Uids,
    /// The uids forced open (by uid or by name), kept apart in at most
    /// half of [`MAX_ENDED_BYTES`]: releases, which any client may send
    /// for uids nobody holds, never push one out; only newer forces do.
    forced: Uids,
}

/// One list of recorded uids.
#[derive(Debug, Default)]
struct Uids {
    set: HashSet<Arc<str>>,
    /// What the set holds, oldest first, each once (sharing the set's
    /// string).
    order: VecDeque<Arc<str>>,
    bytes: usize,
}

impl Uids {
    fn add(&mut self, uid: &str) {
        if self.set.contains(uid) {
            return;
        }
        let uid: Arc<str> = uid.into();
        self.set.insert(uid.clone());
        self.bytes += uid.len() + ENTRY_COST;
        self.order.push_back(uid);
    }

    fn forget_oldest(&mut self) -> bool {
        let Some(oldest) = self.order.pop_front() else {
            return false;
        };
        self.set.remove(&oldest);
        self.bytes -= oldest.len() + ENTRY_COST;
        true
    }
}

impl Record {
    fn add(&mut self, uid: &str, forced: bool) {
        if forced {
            self.forced.add(uid);
            while self.forced.bytes > MAX_ENDED_BYTES / 2 && self.forced.forget_oldest() {}
        } else if !self.forced.set.contains(uid) {
            self.released.add(uid);
        }
        // The forced keep within half the bound, so forgetting releases
        // alone brings the whole within it.
        while self.bytes() > MAX_ENDED_BYTES && self.released.forget_oldest() {}
    }

    fn bytes(&self) -> usize {
        self.released.bytes + self.forced.bytes
    }

    fn holds(&self, uid: &str) -> bool {
        self.released.set.contains(uid) || self.forced.set.contains(uid)
    }
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Ended {
    record: Mutex<Record>,
    /// Whether the record holds a uid: set under the record's mutex
    /// before the uid is in it, cleared under it once it holds none, so
    /// that [`holds`](Self::holds), on every grant, skips the mutex while
    /// no quarantine's record is kept (nearly always).
    kept: AtomicBool,
}

impl Ended {
    fn record(&self, quarantine_end: u64) -> std::sync::MutexGuard<'_, Record> {
        let mut record = self.record.lock().unwrap_or_else(PoisonError::into_inner);
        if record.quarantine_end != quarantine_end {
            *record = Record {
                quarantine_end,
                ..Record::default()
            };
            self.kept.store(false, Ordering::SeqCst);
        }
        record
    }

    /// Notes that `uid` is being released, or its entries forced open
    /// when `forced`, during the quarantine ending at `quarantine_end`.
    pub(crate) fn note(&self, quarantine_end: u64, uid: &str, forced: bool) {
        let mut record = self.record(quarantine_end);
        // Before the uid is in the record: a `holds` that finds the flag
        // clear ran before this note.
        self.kept.store(true, Ordering::SeqCst);
        record.add(uid, forced);
    }

    /// Whether a refresh of `uid` may re-create entries during the
    /// quarantine ending at `quarantine_end`.
    pub(crate) fn may_recreate(&self, quarantine_end: u64, uid: &str) -> bool {
        !self.record(quarantine_end).holds(uid)
    }

    /// Whether `uid` is in the record, of whichever quarantine: a lock or
    /// a wait for it after the quarantine ended came after its release.
    pub(crate) fn holds(&self, uid: &str) -> bool {
        if !self.kept.load(Ordering::SeqCst) {
            return false;
        }
        self.record
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .holds(uid)
    }

    /// Forgets the record of the quarantine that ended at `quarantine_end`
    /// (the caller checked it is over, with a margin): after it, refreshes
    /// re-create nothing, so nothing reads it again. The record of another
    /// quarantine (a restart since started one) stays.
    pub(crate) fn forget_after_quarantine(&self, quarantine_end: u64) {
        let mut record = self.record.lock().unwrap_or_else(PoisonError::into_inner);
        if record.bytes() > 0 && record.quarantine_end == quarantine_end {
            *record = Record::default();
            self.kept.store(false, Ordering::SeqCst);
        }
    }

    /// Forgets everything: the locker restarted.
    pub(crate) fn clear(&self) {
        let mut record = self.record.lock().unwrap_or_else(PoisonError::into_inner);
        *record = Record::default();
        self.kept.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_record_of_the_quarantine_that_ended_is_forgotten() {
        let ended = Ended::default();
        // A restart started the quarantine ending at 8 after the sweep saw
        // the one ending at 7 over: its record stays.
        ended.note(8, "released", false);
        ended.forget_after_quarantine(7);
        assert!(!ended.may_recreate(8, "released"));
        ended.forget_after_quarantine(8);
        assert!(ended.may_recreate(8, "released"));
        assert_eq!(ended.record(8).bytes(), 0);
    }

    #[test]
    fn past_its_bound_the_record_forgets_the_oldest_releases_first() {
        let ended = Ended::default();
        let long = "u".repeat(1000);
        ended.note(7, "first", false);
        assert!(!ended.may_recreate(7, "first"));
        assert!(ended.may_recreate(7, "second"));
        let fit = MAX_ENDED_BYTES / (1000 + ENTRY_COST) + 1;
        for i in 0..fit {
            ended.note(7, &format!("{long}{i}"), false);
        }
        // The oldest went; the newest stay; nobody else is refused.
        assert!(ended.may_recreate(7, "first"));
        assert!(!ended.may_recreate(7, &format!("{long}{}", fit - 1)));
        assert!(ended.may_recreate(7, "second"));
        let record = ended.record(7);
        assert!(record.bytes() <= MAX_ENDED_BYTES);
        assert_eq!(record.released.order.len(), record.released.set.len());
        drop(record);
        // Another quarantine starts from nothing.
        ended.note(8, "first", false);
        assert!(ended.may_recreate(8, &format!("{long}{}", fit - 1)));
    }

    /// Releases, which cost a client nothing (of uids nobody holds), never
    /// push out a uid forced open; forced uids keep within half the bound,
    /// the newest kept.
    #[test]
    fn releases_never_push_out_a_forced_uid() {
        let ended = Ended::default();
        let long = "u".repeat(1000);
        ended.note(7, "forced", true);
        ended.note(7, "released-then-forced", false);
        ended.note(7, "released-then-forced", true);
        let fit = MAX_ENDED_BYTES / (1000 + ENTRY_COST) + 1;
        for i in 0..fit {
            ended.note(7, &format!("{long}{i}"), false);
        }
        assert!(!ended.may_recreate(7, "forced"));
        assert!(!ended.may_recreate(7, "released-then-forced"));
        assert!(ended.holds("forced"));
        assert!(ended.record(7).bytes() <= MAX_ENDED_BYTES);
        for i in 0..fit {
            ended.note(7, &format!("f{long}{i}"), true);
        }
        let record = ended.record(7);
        assert!(record.forced.bytes <= MAX_ENDED_BYTES / 2);
        assert!(record.bytes() <= MAX_ENDED_BYTES);
        assert!(record
            .forced
            .set
            .contains(format!("f{long}{}", fit - 1).as_str()));
        assert!(!record.released.order.is_empty(), "releases keep room");
    }
}
