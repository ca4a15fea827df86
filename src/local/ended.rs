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
//! * it is recorded before the release removes anything, so a refresh
//!   racing the release cannot slip in between;
//! * the record is bounded: past [`MAX_ENDED_BYTES`] nothing more is
//!   recorded and no refresh re-creates anything until the quarantine ends
//!   (refusing to re-create is safe: the holder's lock stands on the other
//!   lockers, and this one simply misses its entry).

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

/// The most the record keeps, counting each uid or name as its length plus
/// [`ENTRY_COST`] bytes.
pub(crate) const MAX_ENDED_BYTES: usize = 8 << 20;

/// What one recorded uid or name costs besides its bytes: its string's
/// header and the set's slot, with room.
const ENTRY_COST: usize = 64;

#[derive(Debug, Default)]
struct Record {
    /// The quarantine the record belongs to (its end, as the locker keeps
    /// it): a record of another quarantine is stale.
    quarantine_end: u64,
    uids: HashSet<String>,
    names: HashSet<String>,
    bytes: usize,
    /// More was released than the record can keep.
    full: bool,
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
        if record.full {
            return;
        }
        let cost = |s: &str| s.len() + ENTRY_COST;
        let grow = if uid.is_empty() {
            names.iter().map(|n| cost(n)).sum()
        } else {
            cost(uid)
        };
        if record.bytes + grow > MAX_ENDED_BYTES {
            record.full = true;
            record.uids = HashSet::new();
            record.names = HashSet::new();
            record.bytes = 0;
            tracing::warn!(
                "more released in quarantine than can be remembered; refreshes re-create no \
                 entries until the quarantine ends"
            );
            return;
        }
        record.bytes += grow;
        if uid.is_empty() {
            record.names.extend(names.iter().cloned());
        } else {
            record.uids.insert(uid.to_owned());
        }
    }

    /// Whether a refresh of `uid` on `names` may re-create entries during
    /// the quarantine ending at `quarantine_end`.
    pub(crate) fn may_recreate(&self, quarantine_end: u64, uid: &str, names: &[String]) -> bool {
        let record = self.record(quarantine_end);
        !record.full
            && !record.uids.contains(uid)
            && !names.iter().any(|n| record.names.contains(n))
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
    fn past_its_bound_the_record_refuses_every_recreation_until_the_next_quarantine() {
        let ended = Ended::default();
        let uid = "u".repeat(1000);
        ended.note(7, "first", &[]);
        assert!(!ended.may_recreate(7, "first", &[]));
        assert!(ended.may_recreate(7, "second", &["a".into()]));
        for i in 0..(MAX_ENDED_BYTES / 1000 + 1) {
            ended.note(7, &format!("{uid}{i}"), &[]);
        }
        assert!(!ended.may_recreate(7, "second", &["a".into()]));
        // Another quarantine starts from nothing.
        assert!(ended.may_recreate(8, "first", &[]));
    }
}
