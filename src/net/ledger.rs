//! The server's account of what its lock table stores, in bytes, per
//! connection and in total, so that neither one connection nor a client
//! that reconnects over and over can grow the server without bound.
//!
//! The `LocalLocker` does not know about connections, so the account is
//! kept beside it, keyed by uid. It errs on the side of counting too much:
//! a charge is dropped only when the lock is released with the resource
//! set it was granted with, or when nothing refreshed the uid for the
//! validity, after which the locker has certainly expired its entries
//! (every refresh of the uid goes through [`Ledger::touch`], after the
//! locker's own refresh, so a charge never lapses before the entries it
//! pays for).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use std::collections::hash_map::RandomState;
use tokio::time::Instant;

use super::metrics::Limit;
use crate::local::{block, map_shrunk, map_sparse, NAME_OVERHEAD, TABLE_KEPT};
use crate::LockArgs;

/// What the lock table stores at most per name of a lock or a place in
/// line, besides the name's bytes: see [`NAME_OVERHEAD`]. Checked with a
/// counting allocator by `tests/net_memory.rs`.
pub(crate) const ENTRY_OVERHEAD: usize = NAME_OVERHEAD;

/// What one lock costs besides its names, at most: the uid, owner and
/// source that its entries share (malloc's header and rounding on top of
/// their lengths, which are charged as they are), this ledger's record of
/// the lock (its map slot at the map's lowest load, 3/8 since the map
/// shrinks below that as the table's maps do, and its list of resource
/// sets, which starts with room for four), and the header of the request's list of names, which a place in
/// line keeps alive. Checked by `tests/net_memory.rs`.
pub(crate) const LOCK_OVERHEAD: usize = {
    // An `Arc<str>` of n bytes takes an (n + 16)-byte block: n + 39 at most.
    let strings = 3 * (2 * std::mem::size_of::<usize>() + 8 + 15);
    let record = ((std::mem::size_of::<(Arc<str>, Charge)>() + 1) * 8).div_ceil(3)
        + block(4 * std::mem::size_of::<(u64, usize)>());
    strings + record + block(2 * std::mem::size_of::<usize>())
};

/// What the lock table and this ledger keep at most beyond the charges of
/// the locks they hold now: their maps' and slabs' room while (nearly)
/// empty, which they keep rather than allocate on every call (see
/// `SLAB_KEPT` in `src/local/table.rs`). Everything else they keep after a
/// peak is given back, so that memory follows the charges of the locks
/// held now; [`ServerConfig::memory_budget`](super::ServerConfig::memory_budget)
/// adds this to the table's cap.
pub(crate) const KEPT: usize = TABLE_KEPT
    + block(32 * (std::mem::size_of::<(Arc<str>, Charge)>() + 1) + 16)
    + block(32 * (std::mem::size_of::<(u64, Usage)>() + 1) + 16);

/// Bytes the server stores for a lock with `args`: each name with its entry,
/// plus uid, owner and source once (entries share them).
pub(crate) fn lock_bytes(args: &LockArgs) -> usize {
    let names: usize = args
        .resources
        .iter()
        .map(|r| r.len() + ENTRY_OVERHEAD)
        .sum();
    names + args.uid.len() + args.owner.len() + args.source.len() + LOCK_OVERHEAD
}

/// The limits the ledger enforces.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) validity: Duration,
    pub(crate) total_bytes: usize,
    pub(crate) bytes_per_connection: usize,
    pub(crate) locks_per_connection: usize,
}

pub(crate) struct Ledger {
    limits: Limits,
    /// Keyed per process, so that a client cannot craft two resource sets
    /// that look the same here and release one by naming the other.
    hasher: RandomState,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    charges: HashMap<Arc<str>, Charge>,
    usage: HashMap<u64, Usage>,
    total: usize,
    /// Earliest time the next full prune may run: pruning scans every
    /// charge, so it runs only when a limit is hit, and at most this often.
    next_prune: Option<Instant>,
}

/// What one uid costs and which connection it counts against.
struct Charge {
    conn: u64,
    touched: Instant,
    /// (hash of the resource set, bytes), one per distinct set granted.
    sets: Vec<(u64, usize)>,
}

impl Charge {
    fn bytes(&self) -> usize {
        self.sets.iter().map(|(_, b)| b).sum()
    }
}

#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Usage {
    pub(crate) locks: usize,
    pub(crate) bytes: usize,
}

/// Why [`Ledger::reserve`] refused a lock: the limit it would break, and
/// what to tell the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Over {
    pub(crate) limit: Limit,
    pub(crate) message: String,
}

/// What [`Ledger::reserve`] did, so that a refused grant can be undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reserved {
    /// The uid already had this resource set charged.
    Already,
    /// A new set was charged under this hash.
    Added(u64),
}

impl Ledger {
    pub(crate) fn new(limits: Limits) -> Self {
        Ledger {
            limits,
            hasher: RandomState::new(),
            inner: Mutex::default(),
        }
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set_hash(&self, resources: &[String]) -> u64 {
        self.hasher.hash_one(resources)
    }

    /// Charges the lock `args` to connection `conn` before it is granted,
    /// or says which limit it would break and what to do.
    pub(crate) fn reserve(&self, conn: u64, args: &LockArgs) -> Result<Reserved, Over> {
        let now = Instant::now();
        let hash = self.set_hash(&args.resources);
        let bytes = lock_bytes(args);
        let mut inner = self.inner();
        if let Some(charge) = inner.charges.get(&args.uid) {
            if charge.sets.iter().any(|(h, _)| *h == hash) {
                inner.adopt(&args.uid, conn, now);
                return Ok(Reserved::Already);
            }
        }
        let new_uid = !inner.charges.contains_key(&args.uid);
        if let Err(reason) = inner.admits(&self.limits, conn, bytes, new_uid) {
            let due = inner.next_prune.is_none_or(|at| now >= at);
            if !due {
                return Err(reason);
            }
            inner.prune(now, self.limits.validity);
            inner.next_prune = Some(now + self.limits.validity / 60);
            inner.admits(&self.limits, conn, bytes, new_uid)?;
        }
        inner.adopt(&args.uid, conn, now);
        let charge = inner
            .charges
            .entry(args.uid.clone())
            .or_insert_with(|| Charge {
                conn,
                touched: now,
                sets: Vec::new(),
            });
        charge.sets.push((hash, bytes));
        inner.total += bytes;
        let usage = inner.usage.entry(conn).or_default();
        usage.bytes += bytes;
        usage.locks += usize::from(new_uid);
        Ok(Reserved::Added(hash))
    }

    /// Takes back a reservation whose grant was refused.
    pub(crate) fn undo(&self, uid: &str, reserved: Reserved) {
        if let Reserved::Added(hash) = reserved {
            self.inner().remove(uid, Some(hash));
        }
    }

    /// Records that `uid` was refreshed (or re-granted) over `conn` just now.
    /// Returns whether the uid was charged; the caller charges an unknown
    /// one that the locker confirmed.
    pub(crate) fn touch(&self, conn: u64, uid: &str) -> bool {
        let mut inner = self.inner();
        inner.adopt(uid, conn, Instant::now())
    }

    /// Charges a lock the locker holds although nothing here knew of it,
    /// without a limit check: refusing would not free the memory, and the
    /// account must stay complete.
    pub(crate) fn charge_unconditionally(&self, conn: u64, args: &LockArgs) {
        let now = Instant::now();
        let hash = self.set_hash(&args.resources);
        let bytes = lock_bytes(args);
        let mut inner = self.inner();
        if inner.charges.contains_key(&args.uid) {
            inner.adopt(&args.uid, conn, now);
            return;
        }
        inner.charges.insert(
            args.uid.clone(),
            Charge {
                conn,
                touched: now,
                sets: vec![(hash, bytes)],
            },
        );
        inner.total += bytes;
        let usage = inner.usage.entry(conn).or_default();
        usage.bytes += bytes;
        usage.locks += 1;
    }

    /// Drops the charge of `uid` for `resources` after a release; with
    /// `None`, every set of the uid (a force-unlock of the uid everywhere).
    /// A release naming another set than the one granted keeps the charge
    /// until it lapses, since entries may remain.
    pub(crate) fn release(&self, uid: &str, resources: Option<&[String]>) {
        let hash = resources.map(|r| self.set_hash(r));
        self.inner().remove(uid, hash);
    }

    /// The connection `uid` is charged to: the one that last reserved,
    /// refreshed or was pushed a grant for it.
    pub(crate) fn owner(&self, uid: &str) -> Option<u64> {
        self.inner().charges.get(uid).map(|c| c.conn)
    }

    /// Forgets the connection's usage when it closes. Its locks stay
    /// charged in total until released or lapsed; a connection that later
    /// refreshes one takes it over.
    pub(crate) fn close(&self, conn: u64) {
        let mut inner = self.inner();
        inner.usage.remove(&conn);
        inner.fit();
    }

    /// The usage of one connection.
    #[cfg(test)]
    pub(crate) fn usage(&self, conn: u64) -> Usage {
        self.inner().usage.get(&conn).copied().unwrap_or_default()
    }

    /// Bytes charged in total.
    pub(crate) fn total(&self) -> usize {
        self.inner().total
    }
}

impl Inner {
    fn admits(&self, limits: &Limits, conn: u64, bytes: usize, new_uid: bool) -> Result<(), Over> {
        let usage = self.usage.get(&conn).copied().unwrap_or_default();
        let over = |limit, message| Err(Over { limit, message });
        if new_uid && usage.locks >= limits.locks_per_connection {
            return over(
                Limit::EntriesPerConnection,
                format!(
                    "this connection already holds {} locks; release some first",
                    limits.locks_per_connection
                ),
            );
        }
        if usage.bytes + bytes > limits.bytes_per_connection {
            return over(
                Limit::BytesPerConnection,
                format!(
                    "this connection's locks would take {} bytes on the server, over its limit \
                     of {} bytes; release some locks or use fewer or shorter names",
                    usage.bytes + bytes,
                    limits.bytes_per_connection
                ),
            );
        }
        if self.total + bytes > limits.total_bytes {
            return over(
                Limit::LockBytes,
                format!(
                    "the server's lock table is full ({} of {} bytes); try again later",
                    self.total, limits.total_bytes
                ),
            );
        }
        Ok(())
    }

    /// Marks `uid` touched now and moves its charge to `conn`. Returns
    /// whether it was charged.
    fn adopt(&mut self, uid: &str, conn: u64, now: Instant) -> bool {
        let Some(charge) = self.charges.get_mut(uid) else {
            return false;
        };
        charge.touched = now;
        if charge.conn != conn {
            let (old, bytes) = (charge.conn, charge.bytes());
            charge.conn = conn;
            if let Some(usage) = self.usage.get_mut(&old) {
                usage.locks = usage.locks.saturating_sub(1);
                usage.bytes = usage.bytes.saturating_sub(bytes);
            }
            let usage = self.usage.entry(conn).or_default();
            usage.locks += 1;
            usage.bytes += bytes;
        }
        true
    }

    /// Removes the set `hash` of `uid`, or all its sets with `None`.
    fn remove(&mut self, uid: &str, hash: Option<u64>) {
        let Some(charge) = self.charges.get_mut(uid) else {
            return;
        };
        let before = charge.bytes();
        match hash {
            Some(hash) => charge.sets.retain(|(h, _)| *h != hash),
            None => charge.sets.clear(),
        }
        let freed = before - charge.bytes();
        let (conn, gone) = (charge.conn, charge.sets.is_empty());
        if gone {
            self.charges.remove(uid);
        }
        self.total -= freed;
        if let Some(usage) = self.usage.get_mut(&conn) {
            usage.bytes = usage.bytes.saturating_sub(freed);
            usage.locks = usage.locks.saturating_sub(usize::from(gone));
        }
        self.fit();
    }

    /// Gives back the maps' room once they are sparse, as the lock table's
    /// maps do (see [`KEPT`]): O(1) amortised.
    fn fit(&mut self) {
        if map_sparse(self.charges.len(), self.charges.capacity()) {
            self.charges.shrink_to(map_shrunk(self.charges.len()));
        }
        if map_sparse(self.usage.len(), self.usage.capacity()) {
            self.usage.shrink_to(map_shrunk(self.usage.len()));
        }
    }

    /// Drops every charge nothing touched for the validity: the locker has
    /// expired those entries.
    fn prune(&mut self, now: Instant, validity: Duration) {
        let lapsed: Vec<Arc<str>> = self
            .charges
            .iter()
            .filter(|(_, c)| now.saturating_duration_since(c.touched) >= validity)
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in lapsed {
            self.remove(&uid, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(uid: &str, names: &[&str]) -> LockArgs {
        LockArgs {
            uid: uid.into(),
            resources: names
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .into(),
            owner: "o".into(),
            source: "s".into(),
            quorum: 1,
        }
    }

    fn ledger(total: usize, per_conn: usize) -> Ledger {
        Ledger::new(Limits {
            validity: Duration::from_secs(60),
            total_bytes: total,
            bytes_per_connection: per_conn,
            locks_per_connection: 100,
        })
    }

    #[tokio::test(start_paused = true)]
    async fn charges_follow_grants_releases_and_lapses() {
        let one = lock_bytes(&args("u1", &["a"]));
        let l = ledger(4 * one, 3 * one);
        assert_eq!(
            l.reserve(1, &args("u1", &["a"])),
            Ok(Reserved::Added(l.set_hash(&["a".into()])))
        );
        assert_eq!(l.reserve(1, &args("u1", &["a"])), Ok(Reserved::Already));
        l.reserve(1, &args("u2", &["b"])).unwrap();
        l.reserve(1, &args("u3", &["c"])).unwrap();
        let err = l.reserve(1, &args("u4", &["d"])).unwrap_err();
        assert!(err.message.contains("over its limit"), "{err:?}");
        assert_eq!(err.limit, Limit::BytesPerConnection);
        // A release naming another set keeps the charge.
        l.release("u1", Some(&["zz".to_string()]));
        assert_eq!(l.usage(1).locks, 3);
        l.release("u1", Some(&["a".to_string()]));
        assert_eq!(
            l.usage(1),
            Usage {
                locks: 2,
                bytes: 2 * one
            }
        );
        // Another connection refreshing a lock takes it over.
        assert!(l.touch(2, "u2"));
        assert_eq!(l.usage(2).locks, 1);
        assert_eq!(l.usage(1).locks, 1);
        // Closing keeps the total; lapsing frees it.
        l.close(1);
        l.close(2);
        assert_eq!(l.total(), 2 * one);
        tokio::time::sleep(Duration::from_secs(61)).await;
        l.reserve(3, &args("u5", &["e"])).unwrap();
        l.reserve(3, &args("u6", &["f"])).unwrap();
        // Over the total: the lapsed charges of u2 and u3 are pruned.
        l.reserve(3, &args("u7", &["g"])).unwrap();
        assert_eq!(l.total(), 3 * one, "lapsed charges were pruned");
    }

    #[tokio::test(start_paused = true)]
    async fn the_total_is_bounded_across_connections() {
        let one = lock_bytes(&args("u0", &["a"]));
        let l = ledger(4 * one, 100 * one);
        for conn in 0..4u64 {
            l.reserve(conn, &args(&format!("u{conn}"), &["a"])).unwrap();
            l.close(conn);
        }
        let err = l.reserve(9, &args("u9", &["a"])).unwrap_err();
        assert!(err.message.contains("lock table is full"), "{err:?}");
        assert_eq!(err.limit, Limit::LockBytes);
        l.undo("u9", Reserved::Added(0));
        assert_eq!(l.total(), 4 * one);
    }
}
