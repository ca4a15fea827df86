//! `Readers`: the entries of a name held in read mode, with an index by
//! uid once they are many, so that asking whether a uid holds the name
//! (every refresh, fence, re-lock and release does, for each name it
//! covers) costs one lookup, not a pass over every reader.
//!
//! Invariants: never empty while held in a `Holders`; no uid twice; while
//! `index` is kept, it maps each reader's uid to its position in `list`
//! and nothing else. The index is built when the list grows past
//! [`INDEXED`] and dropped when it falls below half of that, so that a
//! list hovering at the bound does not rebuild it on every change; every
//! other change costs O(1), none a pass over the list.

use std::sync::Arc;

use foldhash::fast::RandomState;

use super::bucket_map::BucketMap;
use super::memory::{fit, room};
use super::Entry;

/// Readers past which a name keeps an index by uid. Below it a pass over
/// the list is as quick as a lookup.
pub(super) const INDEXED: usize = 32;

/// The entries of a name held in read mode.
#[derive(Debug)]
pub(in crate::local) struct Readers {
    list: Vec<Entry>,
    /// Keyed with a randomly seeded hash, as the table is: uids come from
    /// the network.
    index: Option<BucketMap<Arc<str>, usize, RandomState>>,
}

impl Readers {
    pub(super) fn new(first: Entry) -> Self {
        Readers {
            list: vec![first],
            index: None,
        }
    }

    pub(super) fn as_slice(&self) -> &[Entry] {
        &self.list
    }

    /// The entries, to change anything but their uids (the index keys them).
    pub(super) fn as_mut_slice(&mut self) -> &mut [Entry] {
        &mut self.list
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.list.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Room the list keeps, in entries.
    #[cfg(test)]
    pub(super) fn capacity(&self) -> usize {
        self.list.capacity()
    }

    /// Where `uid`'s entry is, if it reads the name.
    pub(super) fn position(&self, uid: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(uid).copied(),
            None => self.list.iter().position(|e| &*e.uid == uid),
        }
    }

    pub(super) fn find_mut(&mut self, uid: &str) -> Option<&mut Entry> {
        let at = self.position(uid)?;
        self.list.get_mut(at)
    }

    /// Adds the entry of a uid that does not read the name yet.
    pub(super) fn push(&mut self, entry: Entry) {
        debug_assert!(self.position(&entry.uid).is_none());
        room(&mut self.list);
        if let Some(index) = &mut self.index {
            index.insert(entry.uid.clone(), self.list.len());
        }
        self.list.push(entry);
        if self.index.is_none() && self.list.len() > INDEXED {
            self.reindex();
        }
    }

    /// Takes out `uid`'s entry, if it reads the name; the last entry takes
    /// its place.
    pub(super) fn remove(&mut self, uid: &str) -> Option<Entry> {
        let at = self.position(uid)?;
        let entry = self.list.swap_remove(at);
        if let Some(index) = &mut self.index {
            index.remove(uid);
            if let Some(moved) = self.list.get(at) {
                index.insert(moved.uid.clone(), at);
            }
        }
        Some(entry)
    }

    /// Takes out `uid`'s entry if it reads the name and `is` says it is
    /// the one meant.
    pub(super) fn remove_if(
        &mut self,
        uid: &str,
        is: impl FnOnce(&Entry) -> bool,
    ) -> Option<Entry> {
        let at = self.position(uid)?;
        if !is(&self.list[at]) {
            return None;
        }
        self.remove(uid)
    }

    /// Gives back room after removals (see [`fit`]): the list's, the
    /// index's once sparse, and the whole index once the list is short.
    pub(super) fn fit(&mut self) {
        fit(&mut self.list);
        if self.list.len() < INDEXED / 2 {
            self.index = None;
        } else if let Some(index) = &mut self.index {
            index.tighten();
        }
    }

    fn reindex(&mut self) {
        let index = self.index.get_or_insert_with(BucketMap::default);
        index.clear();
        index.extend(
            self.list
                .iter()
                .enumerate()
                .map(|(at, e)| (e.uid.clone(), at)),
        );
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};
    use tokio::time::Instant;

    use super::super::{Holders, Name, Shard};
    use super::INDEXED;
    use crate::{LockArgs, LockMode};

    /// A readers' index counted in buckets, not by `capacity()`.
    mod a_names_readers_index_counted_in_buckets_stays_at_least_three_eighths_full;

    /// The readers' index never disagrees with their list: a shard whose
    /// names gain and lose readers across the index's bounds, by grants,
    /// releases, refreshes and expiry in a seeded random order, answers
    /// who holds what as a plain map of the same history does.
    #[test]
    fn readers_found_through_the_index_match_a_model_of_the_same_history() {
        for seed in 0..6u64 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut shard = Shard::default();
            // (name, uid) -> last refresh, in milliseconds.
            let mut model: HashMap<(usize, usize), u64> = HashMap::new();
            let start = Instant::now();
            let validity = 400;
            let uids = 3 * INDEXED;
            let args = |name: usize, uid: usize| LockArgs {
                uid: format!("reader-{uid}").into(),
                resources: vec![format!("name-{name}")].into(),
                owner: "o".into(),
                source: "s".into(),
                quorum: 1,
            };
            let mut freed = Vec::new();
            let mut indexed = 0;
            for step in 0..2000u64 {
                let now = start + Duration::from_millis(step);
                let (name, uid) = (rng.random_range(0..3), rng.random_range(0..uids));
                let a = args(name, uid);
                match rng.random_range(0..10) {
                    0..=4 => {
                        let again = shard.grant(
                            Name::new(&a.resources, 0),
                            &a,
                            LockMode::Read,
                            now,
                            None,
                            None,
                            &mut freed,
                        );
                        // A repeated grant keeps the entry as it was.
                        let held = model.contains_key(&(name, uid));
                        model.entry((name, uid)).or_insert(step);
                        assert_eq!(again, held, "seed {seed} step {step}: a repeated grant");
                    }
                    5..=7 => {
                        let released =
                            shard.release(Name::new(&a.resources, 0), &a.uid, None, &mut freed);
                        let held = model.remove(&(name, uid)).is_some();
                        assert_eq!(released, held, "seed {seed} step {step}: a release");
                    }
                    8 => {
                        let refreshed = shard.refresh(&a.resources[0], &a.uid, now);
                        let held = model.get_mut(&(name, uid)).map(|at| *at = step).is_some();
                        assert_eq!(refreshed, held, "seed {seed} step {step}: a refresh");
                    }
                    _ => {
                        let gone = shard.expire(now, Duration::from_millis(validity), &mut freed);
                        let before = model.len();
                        model.retain(|_, at| *at + validity > step);
                        assert_eq!(
                            gone,
                            before - model.len(),
                            "seed {seed} step {step}: expiry"
                        );
                    }
                }
                for name in 0..3 {
                    let resource = format!("name-{name}");
                    for uid in 0..uids {
                        assert_eq!(
                            shard.holds_any(&resource, &format!("reader-{uid}")),
                            model.contains_key(&(name, uid)),
                            "seed {seed} step {step}: does reader-{uid} hold {resource}?"
                        );
                    }
                    let readers = match shard.get(&resource) {
                        Some(Holders::Readers(v)) => v.len(),
                        _ => 0,
                    };
                    let expected = model.keys().filter(|(n, _)| *n == name).count();
                    assert_eq!(
                        readers, expected,
                        "seed {seed} step {step}: readers of {resource}"
                    );
                    if let Some(Holders::Readers(v)) = shard.get(&resource) {
                        assert!(
                            v.index.is_none() || v.len() >= INDEXED / 2,
                            "seed {seed} step {step}: an index kept for {} readers",
                            v.len()
                        );
                        indexed += usize::from(v.index.is_some());
                    }
                }
            }
            assert!(indexed > 0, "seed {seed}: no name was ever indexed");
        }
    }
}
