//! A name forced open by the admin: its holders go, and so do their
//! places in its line. The server treats a forced uid as released,
//! refusing its waits; a place of it left standing would be granted to it
//! the moment the name came free, a lock nobody may refresh.

use std::collections::hash_map;
use std::sync::Arc;

use super::{settle, Name, Shard};
use crate::locker::wait::Ticket;
use crate::LockArgs;

impl Shard {
    /// Drops every entry on `name`, noting each holder's uid in `cleared`,
    /// and the places those uids keep in its line, each request (with its
    /// ticket) noted in `left` so that the caller can end its places on
    /// other names. Returns whether there were entries.
    pub(in crate::local) fn clear(
        &mut self,
        name: Name,
        freed: &mut Vec<Name>,
        cleared: &mut Vec<Arc<str>>,
        left: &mut Vec<(LockArgs, Ticket)>,
    ) -> bool {
        let hash_map::Entry::Occupied(mut slot) = self.map.entry(name) else {
            return false;
        };
        let Some(holders) = slot.get_mut().holders.take() else {
            return false;
        };
        let here: Vec<Arc<str>> = holders.entries().iter().map(|e| e.uid.clone()).collect();
        for e in holders.entries() {
            self.by_refresh.remove(e.slot);
        }
        slot.get_mut().queue.retain(|p| {
            let forced = here.iter().any(|uid| *uid == p.args.uid);
            if forced {
                left.push((p.args.clone(), p.ticket));
            }
            !forced
        });
        self.fence_floor = settle(slot, self.fence_floor, freed);
        cleared.extend(here);
        self.fit();
        true
    }
}
