//! Names forced open by the admin: their holders go, and so do those
//! holders' places in the lines of every name forced in the same call.
//! The server treats a forced uid as released, refusing its waits; a place
//! of it left standing would be granted to it the moment its name came
//! free, a lock nobody may refresh.

use std::collections::hash_map;
use std::sync::Arc;

use super::{settle, Name, Shard};
use crate::locker::wait::Ticket;
use crate::LockArgs;

impl Shard {
    /// Drops every entry on `name`, noting each holder's uid in `cleared`.
    /// Returns whether there were entries. The holders' places are dropped
    /// apart, once every name of the call is cleared
    /// ([`drop_places_of`](Self::drop_places_of)): a holder of one forced
    /// name may wait in the line of another.
    pub(in crate::local) fn clear(
        &mut self,
        name: Name,
        freed: &mut Vec<Name>,
        cleared: &mut Vec<Arc<str>>,
    ) -> bool {
        let hash_map::Entry::Occupied(mut slot) = self.map.entry(name) else {
            return false;
        };
        let Some(holders) = slot.get_mut().holders.take() else {
            return false;
        };
        self.fence_floor = settle(slot, self.fence_floor, freed);
        for e in holders.entries() {
            self.by_refresh.remove(e.slot);
            cleared.push(e.uid.clone());
        }
        self.fit();
        true
    }

    /// Drops the places of `uids` in the line of `name`, noting each
    /// request (with its ticket) in `left` so that the caller can end its
    /// places on other names.
    pub(in crate::local) fn drop_places_of(
        &mut self,
        name: Name,
        uids: &[Arc<str>],
        freed: &mut Vec<Name>,
        left: &mut Vec<(LockArgs, Ticket)>,
    ) {
        let hash_map::Entry::Occupied(mut slot) = self.map.entry(name) else {
            return;
        };
        let before = slot.get().queue.len();
        slot.get_mut().queue.retain(|p| {
            let forced = uids.contains(&p.args.uid);
            if forced
                && !left
                    .iter()
                    .any(|(a, t)| *t == p.ticket && a.uid == p.args.uid)
            {
                left.push((p.args.clone(), p.ticket));
            }
            !forced
        });
        if slot.get().queue.len() != before {
            self.fence_floor = settle(slot, self.fence_floor, freed);
            self.fit();
        }
    }
}
