//! What a lock server asks of its locker beyond the `NetLocker` calls, to
//! keep its charges true to the table: whether a uid holds its names after
//! a refresh, or by the grant of a given wait.

use super::LocalLocker;
use crate::locker::wait::Ticket;
use crate::{LockArgs, LockMode};

impl LocalLocker {
    /// Whether `args.uid` holds every resource of `args.resources` in
    /// `mode`. The lock server asks after a refresh in quarantine, which
    /// answers the quarantine error whether or not it re-created entries,
    /// so that it charges only entries that exist.
    pub(crate) fn holds_all(&self, args: &LockArgs, mode: LockMode) -> bool {
        self.with_shards(args, |set, _, _| {
            args.resources
                .iter()
                .enumerate()
                .all(|(pos, r)| set.shard(pos).holds(r, &args.uid, mode))
        })
        .unwrap_or(false)
    }

    /// Whether `args.uid` holds any resource of `args.resources`, in either
    /// mode. The lock server asks after a refresh that found nothing to
    /// refresh: a uid that holds none of its names there any more (forced
    /// open, expired) is charged for nothing.
    pub(crate) fn holds_any(&self, args: &LockArgs) -> bool {
        self.with_shards(args, |set, _, _| {
            args.resources
                .iter()
                .enumerate()
                .any(|(pos, r)| set.shard(pos).holds_any(r, &args.uid))
        })
        .unwrap_or(true)
    }

    /// Whether `args.uid` holds every resource of `args.resources` by a
    /// grant of a wait under `ticket`: whether the wait for them was
    /// granted (a place is granted on all its names at once). The lock
    /// server asks when a place whose set was charged for it alone ends
    /// beside entries of its uid: only entries granted to that wait may be
    /// paid for by the set's charge. Some names held under the ticket are
    /// not enough: the same waiter may have been granted them by an
    /// earlier wait of its own, for a set charged as its own. It asks too
    /// when such a set's wait is asked again beside entries of its uid:
    /// only a grant of that very wait may be one it has not recorded yet.
    pub(crate) fn holds_granted_to(&self, args: &LockArgs, ticket: Ticket) -> bool {
        self.with_shards(args, |set, _, _| {
            args.resources
                .iter()
                .enumerate()
                .all(|(pos, r)| set.shard(pos).holds_granted_to(r, &args.uid, ticket))
        })
        .unwrap_or(true)
    }

    /// The names of `args.resources` on which `args.uid` holds no entry, in
    /// either mode. The lock server asks after a release of a leader's
    /// uid, to give back the charge of the proclamations that went with
    /// their entries.
    pub(crate) fn names_not_held(&self, args: &LockArgs) -> Vec<String> {
        self.with_shards(args, |set, _, _| {
            let mut left = Vec::new();
            for (pos, r) in args.resources.iter().enumerate() {
                if !set.shard(pos).holds_any(r, &args.uid) {
                    left.push(r.clone());
                }
            }
            left
        })
        .unwrap_or_default()
    }

    /// Whether `args.uid` keeps a place in line on any resource of
    /// `args.resources`, under any ticket. The lock server asks before it
    /// drops the charge of names a refresh found none of held: a place
    /// there shares that charge.
    pub(crate) fn queued_any(&self, args: &LockArgs) -> bool {
        self.with_shards(args, |set, _, _| {
            args.resources
                .iter()
                .enumerate()
                .any(|(pos, r)| set.shard(pos).queued_any(r, &args.uid))
        })
        .unwrap_or(true)
    }
}
