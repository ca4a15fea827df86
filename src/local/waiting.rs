//! Places in line on a `LocalLocker`: the waiting lock call, and how
//! places end.
//!
//! One waiter (a uid, or a ticket) keeps the places of its newest request
//! only: a request replaces the same waiter's places on the names it
//! names, and ends those that an earlier request of the waiter keeps on
//! other names, once the table can tell (the two requests share a name).
//! A place is never a grant: ending one only lets others in sooner.

use std::collections::HashSet;
use std::sync::Arc;

use super::table::{Name, Wounded};
use super::{deliver, LocalLocker};
use crate::locker::wait::{Ticket, WaitArgs, WaitReply};
use crate::quorum::clock::after;
use crate::{Error, LockArgs, LockMode};

/// Ends `old.uid`'s places with `ticket` (any, with `None`) on `old`'s
/// names but `keep`, in the locked shards `set`; with `request`, only the
/// places of that very request (whose list of names it is), not a newer
/// request's of the same waiter that replaced them on some names.
pub(super) fn leave_in(
    set: &mut super::ShardSet<'_>,
    freed: &mut Vec<Name>,
    old: &LockArgs,
    ticket: Option<Ticket>,
    keep: &[String],
    request: Option<&Arc<[String]>>,
) -> PlaceEnd {
    let keep: HashSet<&str> = keep.iter().map(String::as_str).collect();
    let mut end = PlaceEnd::default();
    for (pos, r) in old.resources.iter().enumerate() {
        if keep.contains(r.as_str()) {
            continue;
        }
        let shard = set.shard(pos);
        end.left |= shard.leave(
            Name::new(&old.resources, pos),
            &old.uid,
            ticket,
            request,
            freed,
        );
        end.held |= shard.holds_any(r, &old.uid);
        end.queued |= shard.queued_any(r, &old.uid);
        #[cfg(feature = "net")]
        {
            end.queued_same |= shard.queued_for(r, &old.uid, &old.resources);
        }
    }
    end
}

/// What [`LocalLocker::end_place`] found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PlaceEnd {
    /// A place was dropped.
    pub(crate) left: bool,
    /// The uid holds an entry on a name whose place was ended.
    #[cfg_attr(not(feature = "net"), allow(dead_code))]
    pub(crate) held: bool,
    /// The uid still keeps a place, under another ticket, on a name whose
    /// place was ended: one a lock server counts elsewhere.
    #[cfg_attr(not(feature = "net"), allow(dead_code))]
    pub(crate) queued: bool,
    /// The uid still keeps a place for exactly the same names (another
    /// request's, which a lock server charges as the same set).
    #[cfg(feature = "net")]
    pub(crate) queued_same: bool,
}

impl LocalLocker {
    /// Drops the places in line that `args.uid` holds on `args.resources`,
    /// keeping any grant it holds. A lock server calls this for the waiters
    /// of a connection that closed: they can no longer be told of a grant.
    /// Returns whether a place was dropped.
    pub fn leave_queue(&self, args: &LockArgs) -> Result<bool, Error> {
        self.leave_places(args, None, &[]).map(|end| end.left)
    }

    /// Ends what is left of a place that `old.uid` kept with `ticket` (any
    /// of its places when `None`): on every name of `old.resources` but
    /// those in `keep`, which a newer request of the same uid renewed.
    /// Says whether a place was dropped, and whether `old.uid` holds an
    /// entry on those names; a lock server keeps a place's charge while it
    /// does. Answers "held" for arguments the table would refuse, so that
    /// nothing is taken for free.
    pub(crate) fn end_place(
        &self,
        old: &LockArgs,
        ticket: Option<Ticket>,
        keep: &[String],
    ) -> PlaceEnd {
        self.leave_places(old, ticket, keep).unwrap_or(PlaceEnd {
            held: true,
            ..PlaceEnd::default()
        })
    }

    /// Ends what is left of the place a lock server recorded for request
    /// `old` with `ticket`: the places of that very request (its list of
    /// names, the one the table keeps with them), on every name where no
    /// newer request of the same waiter replaced them. A newer request's
    /// places are left alone, over whichever connection it came, whatever
    /// the order of the two calls. Answers "held" for arguments the table
    /// would refuse, so that nothing is taken for free.
    #[cfg(feature = "net")]
    pub(crate) fn end_request_place(&self, old: &LockArgs, ticket: Ticket) -> PlaceEnd {
        self.with_shards(old, |set, _, freed| {
            leave_in(set, freed, old, Some(ticket), &[], Some(&old.resources))
        })
        .unwrap_or(PlaceEnd {
            held: true,
            ..PlaceEnd::default()
        })
    }

    /// See [`end_place`](Self::end_place).
    fn leave_places(
        &self,
        old: &LockArgs,
        ticket: Option<Ticket>,
        keep: &[String],
    ) -> Result<PlaceEnd, Error> {
        self.with_shards(old, |set, _, freed| {
            leave_in(set, freed, old, ticket, keep, None)
        })
    }

    /// How many places in line this locker keeps, over all resources.
    pub fn waiting(&self) -> usize {
        let mut places = 0;
        self.shards.any_shard(|shard| {
            places += shard.waiting();
            false
        });
        places
    }

    /// A waiting lock call: see [`NetLocker::lock_wait`].
    pub(super) fn grant_or_queue(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error> {
        if wait.place_ttl.is_zero() {
            return Err(Error::invalid(
                "a place in line needs a place_ttl above zero",
            ));
        }
        let ticket = wait.ticket;
        let mut notices = Vec::new();
        let mut wounded = Wounded::default();
        let mut superseded = Vec::new();
        let reply = self.with_shards(args, |set, now, freed| {
            let resources = args.resources.iter().enumerate();
            if let Some(err) = self.quarantine_error(now) {
                // Entries it holds here (re-created by a refresh) are kept
                // alive, but the answer must not count: see `refresh_entries`.
                for (pos, r) in resources {
                    set.shard(pos).refresh(r, &args.uid, now);
                }
                return Err(err);
            }
            // Overtaken by its own release (a waiter's re-check that came
            // after it gave up or let go): no place, no grant.
            if self.was_released(&args.uid, now) {
                return Ok(WaitReply::Refused);
            }
            // The grant or the place below replaces the same waiter's
            // earlier places on these names; its earlier requests may have
            // named others too.
            for (pos, r) in resources.clone() {
                set.shard(pos).superseded(r, args, ticket, &mut superseded);
            }
            // Released or forced: either way its waits are refused now.
            let forced = |uid: &str| self.was_released(uid, now);
            if resources.clone().all(|(pos, r)| {
                set.shard(pos)
                    .in_line(r, &args.uid, mode, Some(ticket), now, &forced)
            }) {
                for (pos, r) in resources {
                    let shard = set.shard(pos);
                    let name = Name::new(&args.resources, pos);
                    if shard.grant(
                        name,
                        args,
                        mode,
                        now,
                        Some(ticket),
                        wait.wake.clone(),
                        freed,
                    ) {
                        // Asked again while granted: the pushed grant may
                        // have been lost, and so may a wound; the wake is
                        // renewed above, the wound is repeated here. The
                        // waiter counts this answer as a refresh (its trust
                        // may start from when it sent the request), so
                        // refresh it is.
                        shard.refresh(r, &args.uid, now);
                        shard.wound_if_blocking(r, &args.uid, now, &forced, &mut notices);
                    }
                }
                return Ok(WaitReply::Granted);
            }
            // A place never needs to outlive the entries it waits for.
            let expires = after(now, wait.place_ttl.min(self.config.validity));
            for (pos, r) in resources {
                // Entries the uid still holds on some of the resources are
                // refreshed: the answer below counts as a refresh.
                set.shard(pos).refresh(r, &args.uid, now);
                set.shard(pos).enqueue(
                    Name::new(&args.resources, pos),
                    args,
                    mode,
                    ticket,
                    expires,
                    wait.wake.clone(),
                    &mut notices,
                    &mut wounded,
                    freed,
                );
            }
            Ok(if wait.wake.is_some() {
                WaitReply::Queued
            } else {
                WaitReply::Refused
            })
        })?;
        deliver(notices);
        self.end_superseded(args, superseded);
        reply
    }

    /// Ends the places that the `superseded` requests of the waiter asking
    /// with `args` keep on names `args` does not name: one waiter (a uid,
    /// or a ticket) keeps the places of its newest request only, so that a
    /// waiter asking again under a new uid for other names (a client may;
    /// the coordinator asks for the same names) leaves nothing standing in
    /// line on the old ones. After the shards of `args` are let go: those
    /// names may lie in other shards, locked in their own order. Meanwhile
    /// the old places may only keep others waiting a moment longer.
    fn end_superseded(&self, args: &LockArgs, superseded: Vec<(LockArgs, Ticket)>) {
        for (old, ticket) in superseded {
            // Its places on the names asked for now were replaced already.
            if old.resources != args.resources {
                self.end_place(&old, Some(ticket), &args.resources);
            }
        }
    }
}
