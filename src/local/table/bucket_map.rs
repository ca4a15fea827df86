//! `BucketMap`: a `HashMap` that knows how much room its buckets hold,
//! so that it can give back room by what it really keeps.
//!
//! `HashMap::capacity()` is the items plus the inserts left before the
//! map must grow. A removal from a crowded group of buckets leaves a
//! tombstone, which counts in neither, so after churn a map reports room
//! for 20 to 40 while its 128 buckets hold 17 items: judged by
//! `capacity()`, it never looks sparse and is never shrunk, while the
//! memory budget charges its items as if it were at least 3/8 full.
//!
//! Invariant: `room` is the room of the map's buckets, tombstones
//! included (7/8 of them, as `capacity()` reports for a fresh table).
//! The buckets change only when an insert grows them, which leaves a
//! fresh table whose `capacity()` is its whole room, or when
//! [`BucketMap::tighten`] rebuilds the map, so noting the larger of the
//! two after every insert keeps it exact: an insert that reuses a
//! tombstone raises `capacity()` by one, never past the room. Removals
//! leave the buckets alone. Every way to insert goes through this type
//! (it hands out no `&mut HashMap`).

use std::borrow::Borrow;
use std::collections::hash_map::{self, HashMap};
use std::hash::{BuildHasher, Hash};
use std::ops::Deref;

use super::memory::{map_shrunk, map_sparse};

/// A `HashMap` that knows the room of its buckets (see the module).
#[derive(Debug, Clone)]
pub(crate) struct BucketMap<K, V, S> {
    map: HashMap<K, V, S>,
    room: usize,
}

impl<K, V, S: Default> Default for BucketMap<K, V, S> {
    fn default() -> Self {
        Self {
            map: HashMap::default(),
            room: 0,
        }
    }
}

impl<K, V, S> Deref for BucketMap<K, V, S> {
    type Target = HashMap<K, V, S>;

    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl<K: Eq + Hash, V, S: BuildHasher + Clone> BucketMap<K, V, S> {
    /// Items the buckets hold before the map must grow, tombstones
    /// counted as taken: what [`map_sparse`] is asked with.
    #[cfg(test)]
    pub(crate) fn room(&self) -> usize {
        self.room
    }

    /// Notes the room after a call that may have grown the buckets.
    fn noted(&mut self) {
        self.room = self.room.max(self.map.capacity());
    }

    /// Inserts, as `HashMap::insert`; the map is tightened after, as after
    /// every insert (see [`tighten`](Self::tighten)).
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<V> {
        let old = self.map.insert(key, value);
        self.noted();
        self.tighten();
        old
    }

    pub(crate) fn extend(&mut self, items: impl IntoIterator<Item = (K, V)>) {
        self.map.extend(items);
        self.noted();
        self.tighten();
    }

    /// The entry of `key`. A vacant key in a map with no room left grows
    /// it here, where the room can be noted and the map tightened, not
    /// inside the entry (a tightened map has room for one more).
    pub(crate) fn entry(&mut self, key: K) -> hash_map::Entry<'_, K, V> {
        if self.map.len() == self.map.capacity() && !self.map.contains_key(&key) {
            self.map.reserve(1);
            self.noted();
            self.tighten();
        }
        self.map.entry(key)
    }

    pub(crate) fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.get_mut(key)
    }

    pub(crate) fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.remove(key)
    }

    pub(crate) fn iter_mut(&mut self) -> hash_map::IterMut<'_, K, V> {
        self.map.iter_mut()
    }

    pub(crate) fn retain(&mut self, keep: impl FnMut(&K, &mut V) -> bool) {
        self.map.retain(keep);
    }

    /// Empties the map; its buckets stay.
    pub(crate) fn clear(&mut self) {
        self.map.clear();
    }

    /// Rebuilds the map, without its tombstones, at the size
    /// [`map_shrunk`] gives (room for one more at least) once fewer than
    /// 3/8 of its buckets hold items ([`map_sparse`]). Callers call it
    /// after removals; every insert calls it itself, since an insert that
    /// finds no room left for the tombstones doubles the buckets of a map
    /// that may hold little more than it did. O(1) unless it rebuilds; a
    /// rebuild leaves the map over 3/8 full (see `memory`), so it is paid
    /// for by the removals or the growth that made the map sparse again.
    pub(crate) fn tighten(&mut self) {
        if map_sparse(self.map.len(), self.room) {
            let size = map_shrunk(self.map.len()).max(self.map.len() + 1);
            let mut fresh = HashMap::with_capacity_and_hasher(size, self.map.hasher().clone());
            fresh.extend(self.map.drain());
            self.map = fresh;
            // A fresh table: no tombstones, so `capacity()` is its room.
            self.room = self.map.capacity();
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};

    use super::super::counting::buckets;
    use super::*;

    /// The room of `map`'s buckets (7/8 of them; one less than their
    /// count in maps under 8 buckets).
    fn measured_room(map: &HashMap<u64, u64, foldhash::fast::RandomState>) -> usize {
        match buckets(map) {
            0 => 0,
            small @ 1..8 => small - 1,
            large => large / 8 * 7,
        }
    }

    /// The room a `BucketMap` notes is the room its buckets hold, through
    /// seeded histories of inserts, entries, removals, retains, clears and
    /// tightens; and a tightened map is never below 3/8 of its buckets.
    #[test]
    fn a_bucket_maps_room_is_the_room_of_its_buckets_through_churn() {
        let mut tombstoned = 0;
        for seed in 0..30u64 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut map: BucketMap<u64, u64, foldhash::fast::RandomState> = BucketMap::default();
            let high = rng.random_range(20..400u64);
            for step in 0..4000 {
                let key = rng.random_range(0..high);
                match rng.random_range(0..100) {
                    0..35 => {
                        map.insert(key, step);
                    }
                    35..50 => {
                        *map.entry(key).or_default() += 1;
                    }
                    50..90 => {
                        map.remove(&key);
                    }
                    90..95 => map.retain(|k, _| k % 7 != key % 7),
                    95..96 => map.clear(),
                    _ => map.extend((0..rng.random_range(1..20)).map(|k| (key + k, 0))),
                }
                tombstoned += usize::from(map.capacity() < map.room());
                let measured = measured_room(&map);
                assert_eq!(
                    map.room(),
                    measured,
                    "seed {seed} step {step}: noted room against the buckets' ({} items)",
                    map.len()
                );
                map.tighten();
                assert!(
                    !map_sparse(map.len(), measured_room(&map)),
                    "seed {seed} step {step}: {} items, room {} after tighten",
                    map.len(),
                    measured_room(&map)
                );
            }
        }
        assert!(
            tombstoned > 0,
            "control: capacity() never left out tombstones, so the room was never needed"
        );
    }
}
