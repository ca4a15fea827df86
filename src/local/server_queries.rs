//! What a lock server asks of its locker beyond the `NetLocker` calls, to
//! keep its charges true to the table: whether a uid holds its names after
//! a refresh, and who held names an admin forces open.

use std::sync::Arc;

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
    /// earlier wait of its own, for a set charged as its own.
    pub(crate) fn holds_granted_to(&self, args: &LockArgs, ticket: Ticket) -> bool {
        self.with_shards(args, |set, _, _| {
            args.resources
                .iter()
                .enumerate()
                .all(|(pos, r)| set.shard(pos).holds_granted_to(r, &args.uid, ticket))
        })
        .unwrap_or(true)
    }

    /// Whether `args.uid` holds every resource of `args.resources` by the
    /// grant of one wait (whichever ticket it had): what a wait for these
    /// very names would hold once granted. Entries granted by plain locks,
    /// or by several waits (each its own set, charged as such), are not.
    /// The lock server asks when a set charged for a place alone is asked
    /// again beside entries of its uid: only then may those entries be a
    /// grant of that place it has not recorded yet.
    pub(crate) fn holds_all_by_one_wait(&self, args: &LockArgs) -> bool {
        self.with_shards(args, |set, _, _| {
            let mut tickets = args
                .resources
                .iter()
                .enumerate()
                .map(|(pos, r)| set.shard(pos).granted_ticket(r, &args.uid));
            let first = tickets.next().flatten();
            first.is_some() && tickets.all(|t| t == first)
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

    /// The uids that hold any resource of `args.resources`, in either mode:
    /// the lock server asks before an admin forces names open, to give
    /// back their charges.
    pub(crate) fn holders_of(&self, args: &LockArgs) -> Vec<Arc<str>> {
        // Asked for a force by name, which carries no uid of its own.
        let probe = LockArgs {
            uid: "holders-of".into(),
            ..args.clone()
        };
        self.with_shards(&probe, |set, _, _| {
            // Without duplicates, in linear time: a name may have as many
            // read holders as a client's limits allow (tens of thousands),
            // and a search of the list for each was quadratic, under the
            // shards' locks.
            let mut seen: std::collections::HashSet<Arc<str>> = std::collections::HashSet::new();
            let mut uids: Vec<Arc<str>> = Vec::new();
            for (pos, r) in args.resources.iter().enumerate() {
                for uid in set.shard(pos).holder_uids(r) {
                    if seen.insert(uid.clone()) {
                        uids.push(uid);
                    }
                }
            }
            uids
        })
        .unwrap_or_default()
    }
}
