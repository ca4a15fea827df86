//! One shard of a `LocalLocker`'s lock table: who holds each resource, and
//! an index of entries by last refresh that makes expiry cost O(expired).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::{LockArgs, LockMode};

/// One grant on one resource.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) uid: Arc<str>,
    pub(super) owner: Arc<str>,
    pub(super) source: Arc<str>,
    pub(super) acquired: Instant,
    pub(super) refreshed: Instant,
    /// Unique within the locker; with `refreshed` it is the entry's key in
    /// the expiry index.
    seq: u64,
}

/// Who holds a resource. A resource with no holders is removed from the
/// map, so freed names never accumulate.
#[derive(Debug)]
pub(super) enum Holders {
    Writer(Entry),
    /// Never empty.
    Readers(Vec<Entry>),
}

impl Holders {
    pub(super) fn mode(&self) -> LockMode {
        match self {
            Holders::Writer(_) => LockMode::Write,
            Holders::Readers(_) => LockMode::Read,
        }
    }

    pub(super) fn entries(&self) -> &[Entry] {
        match self {
            Holders::Writer(e) => std::slice::from_ref(e),
            Holders::Readers(v) => v,
        }
    }

    fn entries_mut(&mut self) -> &mut [Entry] {
        match self {
            Holders::Writer(e) => std::slice::from_mut(e),
            Holders::Readers(v) => v,
        }
    }

    fn holds(&self, uid: &str) -> bool {
        self.entries().iter().any(|e| &*e.uid == uid)
    }
}

/// Whether `uid` may be granted `mode` on a resource with these holders. A
/// uid that already holds it in the same mode may re-lock (idempotent);
/// holding it in the other mode is a conflict.
pub(super) fn admits(holders: Option<&Holders>, uid: &str, mode: LockMode) -> bool {
    match (holders, mode) {
        (None, _) => true,
        (Some(Holders::Writer(e)), LockMode::Write) => &*e.uid == uid,
        (Some(Holders::Readers(_)), LockMode::Read) => true,
        (Some(_), _) => false,
    }
}

/// The resources of one shard and their expiry index.
#[derive(Default)]
pub(super) struct Shard {
    map: HashMap<Arc<str>, Holders>,
    /// (last refresh, seq) of every entry, oldest first.
    by_refresh: BTreeMap<(Instant, u64), Arc<str>>,
}

impl Shard {
    pub(super) fn get(&self, resource: &str) -> Option<&Holders> {
        self.map.get(resource)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, &Holders)> {
        self.map.iter().map(|(r, h)| (&**r, h))
    }

    /// Grants `args.uid` on `resource` after [`admits`] said yes. A uid that
    /// already holds the resource keeps its entry.
    pub(super) fn grant(
        &mut self,
        resource: &str,
        args: &LockArgs,
        mode: LockMode,
        now: Instant,
        seq: u64,
    ) {
        if self.map.get(resource).is_some_and(|h| h.holds(&args.uid)) {
            return;
        }
        let entry = Entry {
            uid: args.uid.clone(),
            owner: args.owner.clone(),
            source: args.source.clone(),
            acquired: now,
            refreshed: now,
            seq,
        };
        let key: Arc<str> = match self.map.get_key_value(resource) {
            Some((key, _)) => key.clone(),
            None => resource.into(),
        };
        self.by_refresh.insert((now, seq), key.clone());
        match self.map.get_mut(resource) {
            Some(Holders::Readers(v)) => v.push(entry),
            // `admits` allows nothing else on a held resource.
            Some(Holders::Writer(_)) => {}
            None => {
                let holders = match mode {
                    LockMode::Write => Holders::Writer(entry),
                    LockMode::Read => Holders::Readers(vec![entry]),
                };
                self.map.insert(key, holders);
            }
        }
    }

    /// Removes the entry of `uid` on `resource` if it holds it in `mode`
    /// (any mode when `None`). Returns whether something was removed.
    pub(super) fn release(&mut self, resource: &str, uid: &str, mode: Option<LockMode>) -> bool {
        let Some(holders) = self.map.get_mut(resource) else {
            return false;
        };
        if mode.is_some_and(|m| m != holders.mode()) {
            return false;
        }
        let removed = match holders {
            Holders::Writer(e) if &*e.uid == uid => Some(e.clone()),
            Holders::Writer(_) => None,
            Holders::Readers(v) => v
                .iter()
                .position(|e| &*e.uid == uid)
                .map(|pos| v.swap_remove(pos)),
        };
        let Some(entry) = removed else {
            return false;
        };
        self.by_refresh.remove(&(entry.refreshed, entry.seq));
        if matches!(holders, Holders::Writer(_)) || holders.entries().is_empty() {
            self.map.remove(resource);
        }
        true
    }

    /// Drops every entry on `resource`. Returns whether there were any.
    pub(super) fn clear(&mut self, resource: &str) -> bool {
        let Some(holders) = self.map.remove(resource) else {
            return false;
        };
        for e in holders.entries() {
            self.by_refresh.remove(&(e.refreshed, e.seq));
        }
        true
    }

    /// Drops every entry of `uid` in this shard. Returns whether there were any.
    pub(super) fn release_everywhere(&mut self, uid: &str) -> bool {
        let held: Vec<Arc<str>> = self
            .map
            .iter()
            .filter(|(_, h)| h.holds(uid))
            .map(|(r, _)| r.clone())
            .collect();
        for resource in &held {
            self.release(resource, uid, None);
        }
        !held.is_empty()
    }

    /// Marks the entry of `uid` on `resource` as refreshed now.
    pub(super) fn refresh(&mut self, resource: &str, uid: &str, now: Instant) -> bool {
        let Some(holders) = self.map.get_mut(resource) else {
            return false;
        };
        let Some(entry) = holders.entries_mut().iter_mut().find(|e| &*e.uid == uid) else {
            return false;
        };
        if let Some(key) = self.by_refresh.remove(&(entry.refreshed, entry.seq)) {
            self.by_refresh.insert((now, entry.seq), key);
        }
        entry.refreshed = now;
        true
    }

    /// Drops entries last refreshed `validity` or longer before `now`. Costs
    /// O(log n) per expired entry and nothing for live ones.
    pub(super) fn expire(&mut self, now: Instant, validity: Duration) -> usize {
        let mut expired = 0;
        while let Some(entry) = self.by_refresh.first_entry() {
            let (refreshed, seq) = *entry.key();
            // A validity too long to add is "never": clamping it would free
            // an entry its holder still trusts.
            if refreshed
                .checked_add(validity)
                .map_or(true, |end| end > now)
            {
                break;
            }
            let resource = entry.remove();
            if let Some(holders) = self.map.get_mut(&resource) {
                match holders {
                    Holders::Writer(e) if e.seq == seq => {
                        self.map.remove(&resource);
                    }
                    Holders::Writer(_) => {}
                    Holders::Readers(v) => {
                        v.retain(|e| e.seq != seq);
                        if v.is_empty() {
                            self.map.remove(&resource);
                        }
                    }
                }
            }
            expired += 1;
        }
        expired
    }

    /// Drops everything, as a crash would.
    pub(super) fn wipe(&mut self) {
        self.map.clear();
        self.by_refresh.clear();
    }
}
