//! What a `LocalLocker` in quarantine released or was forced to give up,
//! so that a refresh arriving late cannot bring it back.
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
//! * a uid released here, and a name forced open here, during the current
//!   quarantine is never re-created by a refresh before that quarantine
//!   ends (after it, refreshes re-create nothing);
//! * it is recorded once the call's arguments were found valid (a refused
//!   call leaves nothing behind), before the release removes anything and
//!   under the same shard locks, so a refresh racing the release cannot
//!   slip in between;
//! * the record is bounded by [`MAX_ENDED_BYTES`]: past it, the oldest
//!   releases are forgotten first. Refusing every re-creation instead would
//!   cost live holders their entry here, and a rolling restart (the next
//!   server restarted once this one is out of quarantine) their lock. What
//!   the bound gives up is a refresh delayed past about 90,000 later
//!   releases on this locker; the transports deliver one connection's
//!   calls in order (TCP), so a refresh reaches a locker after its own
//!   release only when a reconnect overtakes it, which is far quicker.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

/// The most the record keeps, counting each uid or name as its length plus
/// [`ENTRY_COST`] bytes.
pub(crate) const MAX_ENDED_BYTES: usize = 8 << 20;

/// What one recorded uid or name costs besides its bytes, at most: its
/// string's counts and the allocator's rounding and header (40), its slot
/// in the set (hashbrown with at most 7/8 of its buckets used, just grown:
/// about 40) and in the queue (24 bytes, up to twice that just grown: 48),
/// with room to spare.
const ENTRY_COST: usize = 160;

/// One recorded release: a uid, or a name forced open.
#[derive(Debug)]
enum Gone {
    Uid(Arc<str>),
    Name(Arc<str>),
}

#[derive(Debug, Default)]
struct Record {
    /// The quarantine the record belongs to (its end, as the locker keeps
    /// it): a record of another quarantine is stale.
    quarantine_end: u64,
    uids: HashSet<Arc<str>>,
    names: HashSet<Arc<str>>,
    /// What the sets hold, oldest first, each once (sharing the set's
    /// string).
    order: VecDeque<Gone>,
    bytes: usize,
}

impl Record {
    fn add(&mut self, gone: Gone) {
        let (set, text) = match &gone {
            Gone::Uid(uid) => (&mut self.uids, uid),
            Gone::Name(name) => (&mut self.names, name),
        };
        if !set.insert(text.clone()) {
            return;
        }
        self.bytes += text.len() + ENTRY_COST;
        self.order.push_back(gone);
        while self.bytes > MAX_ENDED_BYTES {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            let text = match oldest {
                Gone::Uid(uid) => self.uids.take(&uid),
                Gone::Name(name) => self.names.take(&name),
            };
            if let Some(text) = text {
                self.bytes -= text.len() + ENTRY_COST;
            }
        }
    }
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Ended {
    record: Mutex<Record>,
}

impl Ended {
    fn record(&self, quarantine_end: u64) -> std::sync::MutexGuard<'_, Record> {
        let mut record = self.record.lock().unwrap_or_else(PoisonError::into_inner);
        if record.quarantine_end != quarantine_end {
            *record = Record {
                quarantine_end,
                ..Record::default()
            };
        }
        record
    }

    /// Notes that `uid` is being released, or (`uid` empty) that `names`
    /// are being forced open, during the quarantine ending at
    /// `quarantine_end`.
    pub(crate) fn note(&self, quarantine_end: u64, uid: &str, names: &[String]) {
        let mut record = self.record(quarantine_end);
        if uid.is_empty() {
            for name in names {
                record.add(Gone::Name(name.as_str().into()));
            }
        } else {
            record.add(Gone::Uid(uid.into()));
        }
    }

    /// Whether a refresh of `uid` on `names` may re-create entries during
    /// the quarantine ending at `quarantine_end`.
    pub(crate) fn may_recreate(&self, quarantine_end: u64, uid: &str, names: &[String]) -> bool {
        let record = self.record(quarantine_end);
        !record.uids.contains(uid) && !names.iter().any(|n| record.names.contains(n.as_str()))
    }

    /// Forgets everything: the locker restarted.
    pub(crate) fn clear(&self) {
        *self.record.lock().unwrap_or_else(PoisonError::into_inner) = Record::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_its_bound_the_record_forgets_the_oldest_releases_first() {
        let ended = Ended::default();
        let long = "u".repeat(1000);
        ended.note(7, "first", &[]);
        ended.note(7, "", &["forced".into()]);
        assert!(!ended.may_recreate(7, "first", &[]));
        assert!(!ended.may_recreate(7, "other", &["forced".into()]));
        assert!(ended.may_recreate(7, "second", &["a".into()]));
        let fit = MAX_ENDED_BYTES / (1000 + ENTRY_COST) + 1;
        for i in 0..fit {
            ended.note(7, &format!("{long}{i}"), &[]);
        }
        // The oldest went; the newest stay; nobody else is refused.
        assert!(ended.may_recreate(7, "first", &[]));
        assert!(ended.may_recreate(7, "other", &["forced".into()]));
        assert!(!ended.may_recreate(7, &format!("{long}{}", fit - 1), &[]));
        assert!(ended.may_recreate(7, "second", &["a".into()]));
        let record = ended.record(7);
        assert!(record.bytes <= MAX_ENDED_BYTES);
        assert_eq!(record.order.len(), record.uids.len() + record.names.len());
        drop(record);
        // Another quarantine starts from nothing.
        ended.note(8, "first", &[]);
        assert!(ended.may_recreate(8, &format!("{long}{}", fit - 1), &[]));
    }
}
