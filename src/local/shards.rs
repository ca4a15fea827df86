//! The sharded map behind `LocalLocker`: resource names hash to one of a
//! fixed number of mutex-protected maps, and multi-resource calls lock the
//! shards they touch in ascending order so they cannot deadlock.

use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Duration;

use tokio::time::Instant;

use super::table::{Holders, Name, Shard, SHARD_KEPT};

/// Enough shards that two cores rarely collide, few enough to scan quickly.
const SHARD_COUNT: usize = 64;

/// What the shards keep at most besides what their entries are charged
/// for: each one's room while (nearly) empty, see [`SHARD_KEPT`].
#[cfg_attr(not(feature = "net"), allow(dead_code))]
pub(crate) const TABLE_KEPT: usize = SHARD_COUNT * SHARD_KEPT;

pub(super) struct Shards {
    shards: Box<[Mutex<Shard>]>,
}

/// The shards one call holds locked, addressed by the position of a resource
/// in the call's resource list.
pub(super) enum ShardSet<'a> {
    /// Every resource hashes to the same shard (always the case for one name).
    One(MutexGuard<'a, Shard>),
    /// `slot_of[pos]` is the index into `guards` for resource `pos`.
    Many {
        guards: Vec<MutexGuard<'a, Shard>>,
        slot_of: Vec<usize>,
    },
}

impl ShardSet<'_> {
    /// Expires old entries in every shard of the set, so the call that
    /// follows never sees an entry past its validity.
    pub(super) fn expire(&mut self, now: Instant, validity: Duration, freed: &mut Vec<Name>) {
        match self {
            ShardSet::One(guard) => {
                guard.expire(now, validity, freed);
            }
            ShardSet::Many { guards, .. } => {
                for guard in guards {
                    guard.expire(now, validity, freed);
                }
            }
        }
    }

    /// The shard holding the resource at position `pos` of the call's list.
    pub(super) fn shard(&mut self, pos: usize) -> &mut Shard {
        match self {
            ShardSet::One(guard) => guard,
            ShardSet::Many { guards, slot_of } => &mut guards[slot_of[pos]],
        }
    }
}

/// FNV-1a: deterministic across runs, so shard placement (and with it lock
/// order) does not vary between test runs.
fn shard_of(name: &str) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash % SHARD_COUNT as u64) as usize
}

fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    // The maps are only touched by short, non-panicking sections; a poisoned
    // mutex still guards consistent data.
    shard.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shards {
    pub(super) fn new() -> Self {
        Shards {
            shards: (0..SHARD_COUNT)
                .map(|_| Mutex::new(Shard::default()))
                .collect(),
        }
    }

    /// Runs `f` with every shard that `resources` touch locked at once, so
    /// the whole call is atomic with respect to other calls.
    pub(super) fn with<R>(
        &self,
        resources: &[String],
        f: impl FnOnce(&mut ShardSet<'_>) -> R,
    ) -> R {
        let first = resources.first().map_or(0, |r| shard_of(r));
        if resources.iter().skip(1).all(|r| shard_of(r) == first) {
            return f(&mut ShardSet::One(lock(&self.shards[first])));
        }
        let of_resource: Vec<usize> = resources.iter().map(|r| shard_of(r)).collect();
        let mut order = of_resource.clone();
        order.sort_unstable();
        order.dedup();
        let guards = order.iter().map(|&i| lock(&self.shards[i])).collect();
        let slot_of = of_resource
            .iter()
            .map(|i| order.binary_search(i).unwrap_or_default())
            .collect();
        f(&mut ShardSet::Many { guards, slot_of })
    }

    /// Drops the entries due in each shard of `resources`, one shard at a
    /// time, when they span several: a call about to lock them all at once
    /// then finds almost nothing left to expire under those locks, so the
    /// expiry of many entries (readers of shared names expiring one after
    /// another, each on every name they held) never keeps every shard
    /// locked at once. The same as a sweep of those shards just before the
    /// call; for names in one shard, the call's own expiry does it.
    pub(super) fn expire_each(
        &self,
        resources: &[String],
        now: Instant,
        validity: Duration,
        freed: &mut Vec<Name>,
    ) {
        // One name (most locks): one shard, and no hash of it here.
        let [first, rest @ ..] = resources else {
            return;
        };
        if rest.is_empty() {
            return;
        }
        let first = shard_of(first);
        if rest.iter().all(|r| shard_of(r) == first) {
            return;
        }
        let mut order: Vec<usize> = resources.iter().map(|r| shard_of(r)).collect();
        order.sort_unstable();
        order.dedup();
        for i in order {
            lock(&self.shards[i]).expire(now, validity, freed);
        }
    }

    /// Runs `f` with the shard of `name` locked.
    pub(super) fn with_one<R>(&self, name: &str, f: impl FnOnce(&mut Shard) -> R) -> R {
        f(&mut lock(&self.shards[shard_of(name)]))
    }

    /// Visits every held resource, one shard at a time.
    pub(super) fn for_each(&self, mut f: impl FnMut(&str, &Holders)) {
        for shard in self.shards.iter() {
            for (name, holders) in lock(shard).iter() {
                f(name, holders);
            }
        }
    }

    /// Runs `f` on every shard, one at a time. Returns whether any call
    /// of `f` returned `true`.
    pub(super) fn any_shard(&self, mut f: impl FnMut(&mut Shard) -> bool) -> bool {
        let mut any = false;
        for shard in self.shards.iter() {
            any |= f(&mut lock(shard));
        }
        any
    }

    /// Expires old entries and places in every shard, one shard at a time,
    /// notes the names somebody waits for, and returns how many entries
    /// went. With `busy` [`Busy::PassOver`], a shard another call holds is
    /// passed over without waiting (see [`Busy`]).
    pub(super) fn expire_all(
        &self,
        now: Instant,
        validity: Duration,
        freed: &mut Vec<Name>,
        busy: Busy,
    ) -> usize {
        self.shards
            .iter()
            .filter_map(|shard| {
                let mut shard = match busy {
                    Busy::Wait => lock(shard),
                    Busy::PassOver => match shard.try_lock() {
                        Ok(shard) => shard,
                        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                        Err(TryLockError::WouldBlock) => return None,
                    },
                };
                shard.expire_places(now, freed);
                Some(shard.expire(now, validity, freed))
            })
            .sum()
    }
}

/// What [`Shards::expire_all`] does with a shard another call holds.
#[derive(Clone, Copy)]
pub(super) enum Busy {
    /// Waits for it: a listing must see every shard expired.
    Wait,
    /// Passes over it, as the periodic sweep does: that call drops the
    /// shard's due entries itself (every call expires each shard it locks,
    /// before it acts), and its lapsed places, which nothing counts as
    /// live, go at a later sweep. A sweep that waited for each shard in
    /// turn made the call that ran it wait behind every call holding many
    /// shards.
    PassOver,
}
