//! Forcing entries open on behalf of the lock server, which tells an
//! admin's force (kept apart from releases, see `released.rs`) from a
//! client's force of its own uid (an ordinary release).

use std::collections::HashSet;
use std::sync::Arc;

use crate::local::table::Name;
use crate::local::LocalLocker;
use crate::{Error, LockArgs};

impl LocalLocker {
    /// Forces open what `args` names, as
    /// [`force_unlock`](crate::NetLocker::force_unlock) does, but notes a
    /// uid it names as forced open (kept apart from the releases, where no
    /// flood of releases reaches it) only when `forced`; otherwise as an
    /// ordinary release. A lock server passes `forced` only for its admin:
    /// a client's force of a uid is no more than a release of it, and must
    /// not push the admin's forced uids out of their record. The holders of
    /// names forced open by name (admin only) are always noted as forced.
    pub(crate) fn force_unlock_as(&self, args: &LockArgs, forced: bool) -> Result<bool, Error> {
        args.validate_text()?;
        match (args.uid.is_empty(), args.resources.is_empty()) {
            (true, true) => Err(Error::invalid(
                "force_unlock needs a uid, resource names, or both",
            )),
            (false, true) => {
                let now = self.clock.now();
                self.note_ended(&args.uid, forced, now);
                let mut freed = Vec::new();
                // Each shard's due entries go first, as in every call: an
                // entry that expired is not there to be forced open.
                let removed = self.shards.any_shard(|shard| {
                    shard.expire(now, self.config.validity, &mut freed);
                    shard.release_everywhere(&args.uid, &mut freed)
                });
                self.promote(freed, self.clock.now());
                if removed && self.boards.in_use() {
                    self.revalidate_boards(None, self.clock.now(), false);
                }
                Ok(removed)
            }
            (false, false) => {
                let removed = self.release_as(args, None, forced)?;
                if forced {
                    // Its places on other names go too: see
                    // `drop_places_everywhere`.
                    let mut freed = Vec::new();
                    self.drop_places_everywhere(std::slice::from_ref(&args.uid), &mut freed);
                    self.promote(freed, self.clock.now());
                }
                Ok(removed)
            }
            (true, false) => self.force_names(args).map(|cleared| !cleared.is_empty()),
        }
    }

    /// Forces open every entry on `args.resources` (the uid is not
    /// looked at), noting each holder's uid as forced, and ends every
    /// place in line of those uids, on any name. Returns the uids whose
    /// entries it removed, each once: what a lock server must give back
    /// the charges of. They are read under the same shard locks as the
    /// removal, so a lock taken on these names before the force ran is
    /// among them, whenever the caller asked.
    pub(crate) fn force_names(&self, args: &LockArgs) -> Result<Vec<Arc<str>>, Error> {
        args.validate_text()?;
        args.validate_resources()?;
        let now = self.clock.now();
        let mut freed = Vec::new();
        // The due entries go first, as in every call (see `with_shards`):
        // one that expired is not forced open, nor its uid noted as forced.
        self.shards
            .expire_each(&args.resources, now, self.config.validity, &mut freed);
        let mut cleared = Vec::new();
        self.shards.with(&args.resources, |set| {
            set.expire(now, self.config.validity, &mut freed);
            for pos in 0..args.resources.len() {
                set.shard(pos)
                    .clear(Name::new(&args.resources, pos), &mut freed, &mut cleared);
            }
            // Before any line is promoted: a holder of one of these names
            // may wait in the line of another.
            let uids = cleared.iter().map(|uid| &**uid).collect();
            for pos in 0..args.resources.len() {
                set.shard(pos)
                    .drop_places_of(Name::new(&args.resources, pos), &uids, &mut freed);
            }
            // Their late refreshes must not bring them back; a later
            // holder of these names may be re-created. Noted under the
            // same shard locks as the removal.
            for uid in &cleared {
                self.note_ended(uid, true, now);
            }
        });
        cleared.sort_unstable();
        cleared.dedup();
        // Their places on other names go too, before any line moves on:
        // see `drop_places_everywhere`.
        self.drop_places_everywhere(&cleared, &mut freed);
        self.promote(freed, self.clock.now());
        if !cleared.is_empty() && self.boards.in_use() {
            self.revalidate_boards(Some(&args.resources), self.clock.now(), false);
        }
        Ok(cleared)
    }

    /// Drops the places in line of `uids`, forced open and noted as such,
    /// wherever they stand, one shard at a time; the names whose lines
    /// may move on are noted in `freed`, for the caller to promote.
    ///
    /// A forced uid's waits are refused from the moment it is noted, under
    /// the shard locks of the names its wait asks for (`grant_or_queue`):
    /// a wait that got in before the note left its places in shards this
    /// walk visits afterwards, and one after it keeps none. So no place of
    /// these uids is left standing once the walk is done. Ending them at
    /// the force, rather than when a line moves on and finds one, matters
    /// twice: a place ahead on a free name keeps the waiters behind it
    /// waiting until it would expire, and the record of forced uids is
    /// bounded, so a place found late might be of a uid it no longer
    /// holds, and be granted.
    fn drop_places_everywhere(&self, uids: &[Arc<str>], freed: &mut Vec<Name>) {
        if uids.is_empty() {
            return;
        }
        let uids: HashSet<&str> = uids.iter().map(|uid| &**uid).collect();
        self.shards.any_shard(|shard| {
            shard.drop_places_everywhere(&uids, freed);
            false
        });
    }
}
