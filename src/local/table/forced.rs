//! Names forced open by the admin: their holders go, and so do those
//! holders' places in line, on every name. The server treats a forced uid
//! as released, refusing its waits; a place of it left standing would be
//! granted to it the moment its names came free (a lock nobody may
//! refresh), or keep the waiters behind it waiting for nothing.

use std::collections::{hash_map, HashSet};
use std::sync::Arc;

use super::{settle, Name, Place, Shard};

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

    /// Drops the places of `uids` in the line of `name`.
    pub(in crate::local) fn drop_places_of(
        &mut self,
        name: Name,
        uids: &HashSet<&str>,
        freed: &mut Vec<Name>,
    ) {
        self.drop_places_where(name, &|p| uids.contains(&*p.args.uid), freed);
    }

    /// Drops the places in the line of `name` that `gone` picks, in one
    /// pass over the line however many it picks.
    pub(in crate::local) fn drop_places_where(
        &mut self,
        name: Name,
        gone: &dyn Fn(&Place) -> bool,
        freed: &mut Vec<Name>,
    ) {
        let hash_map::Entry::Occupied(mut slot) = self.map.entry(name) else {
            return;
        };
        if slot.get_mut().queue.retain(|p| !gone(p)) > 0 {
            self.fence_floor = settle(slot, self.fence_floor, freed);
            self.fit();
        }
    }

    /// Drops the places of `uids` in every line of this shard: one walk of
    /// its lines, however many uids (a force of a name read by tens of
    /// thousands of waiters).
    pub(in crate::local) fn drop_places_everywhere(
        &mut self,
        uids: &HashSet<&str>,
        freed: &mut Vec<Name>,
    ) {
        let lines: Vec<Name> = self
            .map
            .iter()
            .filter(|(_, r)| r.queue.iter().any(|p| uids.contains(&*p.args.uid)))
            .map(|(name, _)| name.clone())
            .collect();
        for name in lines {
            self.drop_places_of(name, uids, freed);
        }
    }
}
