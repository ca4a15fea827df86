//! The server's account of what its lock table stores, in bytes, per
//! connection and in total, so that neither one connection nor a client
//! that reconnects over and over can grow the server without bound.
//!
//! The `LocalLocker` does not know about connections, so the account is
//! kept beside it, keyed by uid. It errs on the side of counting too much:
//! a charge is dropped only when the lock is released with the resource
//! set it was granted with, or when nothing refreshed the uid for the
//! validity and the locker's expiry pass after it (`Limits::lapse`), by
//! when the locker has certainly expired its entries and places and given
//! back their memory
//! (every refresh of the uid goes through [`Ledger::touch`] or
//! [`Ledger::reserve`], after the locker's own refresh, so a charge never
//! lapses before the entries it pays for). Nothing is charged without a
//! limit check: a refresh that reaches entries not charged for its names
//! is charged, or refused, as a lock is.
//!
//! Leader election keeps more beside the entries (`src/local/boards.rs`):
//! a leader's proclamation, with a value of up to 4 KiB, and observers'
//! watches. Both are charged to the uid that made them ([`Board`]), with the
//! same limits and the same lapse.

use crate::local::BucketMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use std::collections::hash_map::RandomState;
use tokio::time::Instant;

use super::labels::Limit;
use crate::quorum::clock::after;
use crate::LockArgs;

mod costs;
mod inner;

use inner::Standing;

pub(crate) use costs::{lock_bytes, proclamation_bytes, watch_bytes, KEPT};

/// One record of a uid on an election board: the board, the hash of its
/// one name, the bytes charged, and whether a later reservation found it
/// charged (its undo then leaves the record, see `Inner::set_board`).
pub(super) type BoardRecord = (Board, u64, usize, bool);

/// What an election keeps on the lock table's boards (`src/local/boards.rs`)
/// beside the entries, charged to a uid as its locks are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Board {
    /// A leader's proclamation, which lives as long as its entry: charged
    /// to the leader's uid and dropped with the lock on the same resource.
    Proclamation,
    /// An observer's watch, which lives until it fires or its ttl (at most
    /// the validity) runs out: charged to the observer's uid until that
    /// uid goes untouched for the lapse, as a lock is.
    Watch,
}

/// What [`Ledger::reserve_board`] did, so that a refused call can be
/// undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BoardReserved {
    board: Board,
    hash: u64,
    /// The record's bytes before; `None` when there was none.
    before: Option<usize>,
    /// The touches the reservation made, put back by an undo.
    touched: Before,
}

/// The limits the ledger enforces.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The locker's validity: a uid untouched that long holds nothing live
    /// there (its entries and places have expired).
    pub(crate) validity: Duration,
    /// How long a charge stays once nothing touches its uid: the locker's
    /// validity, after which its entries and places have expired, and the
    /// time its expiry pass may take to drop them from memory.
    pub(crate) lapse: Duration,
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
    charges: BucketMap<Arc<str>, Charge, std::hash::RandomState>,
    usage: BucketMap<u64, Usage, std::hash::RandomState>,
    total: usize,
    /// Earliest time the next full prune may run: pruning scans every
    /// charge, so it runs only when a limit is hit, and at most this often.
    next_prune: Option<Instant>,
    /// When the server's expiry timer next prunes, whether or not a limit
    /// was hit: see [`Ledger::sweep`].
    next_sweep: Option<Instant>,
}

/// What one uid costs and which connection it counts against.
struct Charge {
    conn: u64,
    touched: Instant,
    /// One per distinct set of names charged.
    sets: Vec<SetCharge>,
    /// What the uid keeps on the election boards, by the hash of its one
    /// resource; empty for plain locks.
    boards: Vec<BoardRecord>,
}

impl Charge {
    fn new(conn: u64, touched: Instant) -> Self {
        Charge {
            conn,
            touched,
            sets: Vec::new(),
            boards: Vec::new(),
        }
    }

    fn bytes(&self) -> usize {
        let sets: usize = self.sets.iter().map(|set| set.bytes).sum();
        sets + self.boards.iter().map(|(_, _, b, _)| b).sum::<usize>()
    }

    fn is_empty(&self) -> bool {
        self.sets.is_empty() && self.boards.is_empty()
    }
}

/// The charge of one set of names of a uid.
#[derive(Debug, Clone, Copy)]
struct SetCharge {
    /// The set's hash ([`Ledger::set_hash`]).
    hash: u64,
    bytes: usize,
    /// Charged for a place in line and never granted since: the charge
    /// pays for the place alone, not for entries of the uid that stand on
    /// some of its names (those were granted as other sets, charged as
    /// such), and goes with the place. A grant of the set, by a lock call
    /// or a place granted, clears it.
    for_place: bool,
    /// When a call naming this set last reserved or refreshed it, or a
    /// grant or refresh of the uid that may have reached it did: a set
    /// untouched for the lapse goes while the uid's other sets live on
    /// (their refreshes do not keep its expired entries' charge).
    touched: Instant,
    /// A later reservation found the set charged (over any connection) and
    /// may stand on it: a refused request that added the set must not take
    /// it back (see [`Ledger::undo`]).
    shared: bool,
}

/// What a reservation charges for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// A lock call about to be granted (or a refresh re-creating entries).
    Grant,
    /// A refresh of entries that stand: it grants nothing.
    Refresh,
    /// A place in line.
    Place,
}

/// What [`Inner::remove`] takes off a uid's charge.
#[derive(Debug, Clone, Copy)]
enum Gone {
    /// One resource set, by its hash, and the place its uid kept beside
    /// its entries there: a release, or a place's end.
    Set(u64),
    /// One charge by its hash alone: what a refused reservation made, or
    /// a place charged beside entries that stay.
    Reserved(u64),
    /// The proclamation made on one name, by that name's hash, whose entry
    /// went.
    Proclamation(u64),
    /// Every set and proclamation (a force of the uid): its watches stay,
    /// since the locker keeps them.
    Locks,
    /// Everything: the uid lapsed.
    All,
}

#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Usage {
    pub(crate) locks: usize,
    pub(crate) bytes: usize,
    /// When a charge of the connection was last made or touched: once
    /// that is a lapse ago, every charge of it has lapsed.
    pub(crate) touched: Option<Instant>,
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
    /// The uid already had this resource set charged; the reservation
    /// touched its charge and its connection's usage as they stood before,
    /// when `true` took the set for a grant where it was charged for a
    /// place alone ([`SetCharge::for_place`]), and grew the set's charge by
    /// the bytes given (a longer owner or source than it was charged for).
    Already(Before, bool, usize),
    /// A new set was charged under this hash, touching the uid's charge
    /// and its connection's usage as they stood before.
    Added(u64, Before),
}

/// When a uid's charge and its connection's usage were touched before a
/// reservation touched them at `at`: a refused grant puts them back, so
/// that a refusal keeps nothing counted longer (a lock that expired
/// without a release counts for the idle close a validity after it was
/// last granted or refreshed, not after a later refused request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Before {
    at: Instant,
    conn: u64,
    /// The hash of the set reserved (0 for an election board's record).
    set: u64,
    /// When that set was touched before, if it was charged.
    set_touched: Option<Instant>,
    /// The connection the uid was charged to, which the reservation moved
    /// the charge from when it was another: a refused request over one
    /// connection takes nothing and refreshes nothing, so the uid's locks
    /// stay counted where they were.
    from: Option<u64>,
    charge: Option<Instant>,
    usage: Option<Instant>,
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
        self.reserve_as(conn, args, self.set_hash(&args.resources), Purpose::Grant)
    }

    /// [`reserve`](Self::reserve) for a refresh of entries that stand,
    /// which grants nothing: a set charged for a place alone stays so.
    pub(crate) fn reserve_refresh(&self, conn: u64, args: &LockArgs) -> Result<Reserved, Over> {
        self.reserve_as(conn, args, self.set_hash(&args.resources), Purpose::Refresh)
    }

    /// [`reserve`](Self::reserve) for a place in line that `args.uid` is
    /// about to ask for: a set it newly charges pays for the place alone
    /// until the set is granted ([`granted_set`](Self::granted_set)).
    pub(crate) fn reserve_place(&self, conn: u64, args: &LockArgs) -> Result<Reserved, Over> {
        self.reserve_as(conn, args, self.set_hash(&args.resources), Purpose::Place)
    }

    /// Charges, as [`reserve`](Self::reserve) charges a lock, the place in
    /// line that `args.uid` is about to ask for beside its own entries on
    /// the same names (waiting for a write lock while it holds a read
    /// lock, say): the table then keeps both an entry and a place on each
    /// name, where the charge of the set pays for one of them. The release
    /// of the set gives both back (it ends the place too).
    pub(crate) fn reserve_beside(&self, conn: u64, args: &LockArgs) -> Result<Reserved, Over> {
        let hash = beside(self.set_hash(&args.resources));
        self.reserve_as(conn, args, hash, Purpose::Place)
    }

    fn reserve_as(
        &self,
        conn: u64,
        args: &LockArgs,
        hash: u64,
        purpose: Purpose,
    ) -> Result<Reserved, Over> {
        let now = Instant::now();
        let bytes = lock_bytes(args);
        let mut inner = self.inner();
        inner.lapse(&args.uid, now, self.limits.lapse);
        let before = inner.touches(&args.uid, conn, hash, now);
        // A set found charged grows to this request's bytes when they are
        // more: the table keeps the newest request's owner and source (a
        // place asked again, a lock taken again), and the set pays for
        // what the table keeps. A refresh stores neither, and grows
        // nothing. The growth is admitted as a new set is; a new set over
        // another connection than the uid's moves the uid's whole charge
        // here, and this connection's limits must hold it all.
        // A request found charged over another connection moves the uid
        // there: admitted as the move it is, unless it is a refresh
        // (refusing one would cost the holder its lock).
        let need = |standing: &Standing| match standing.set {
            None => Some(bytes),
            Some(_) if purpose == Purpose::Refresh => None,
            Some(charged) => {
                let grow = bytes.saturating_sub(charged);
                (grow > 0 || standing.moving > 0).then_some(grow)
            }
        };
        let standing =
            inner.admit_as_it_stands(&self.limits, (conn, &args.uid), None, hash, need, now)?;
        if standing.set.is_some() {
            let grow = need(&standing).unwrap_or(0);
            inner.adopt(&args.uid, conn, now);
            let taken = inner.found(&args.uid, hash, grow, purpose == Purpose::Grant, now);
            return Ok(Reserved::Already(before, taken, grow));
        }
        let new_uid = standing.new_uid;
        inner.adopt(&args.uid, conn, now);
        let charge = inner
            .charges
            .entry(args.uid.clone())
            .or_insert_with(|| Charge::new(conn, now));
        charge.sets.push(SetCharge {
            hash,
            bytes,
            for_place: purpose == Purpose::Place,
            touched: now,
            shared: false,
        });
        inner.total += bytes;
        let usage = inner.usage.entry(conn).or_default();
        usage.bytes += bytes;
        usage.locks += usize::from(new_uid);
        usage.touched = Some(now);
        Ok(Reserved::Added(hash, before))
    }

    /// Charges `bytes` for what `args.uid` keeps on the election `board` of
    /// the one resource of `args`, to connection `conn`, before the locker
    /// is asked; or says which limit it would break. A uid keeps one record
    /// per board and resource, charged the most it was asked for: a
    /// proclamation that the locker keeps when a newer one of the same uid
    /// is already there is never charged less than it takes.
    pub(crate) fn reserve_board(
        &self,
        conn: u64,
        args: &LockArgs,
        board: Board,
        bytes: usize,
    ) -> Result<BoardReserved, Over> {
        let now = Instant::now();
        let hash = self.set_hash(&args.resources);
        let mut inner = self.inner();
        inner.lapse(&args.uid, now, self.limits.lapse);
        // A new uid is admitted whatever it adds (it counts a lock), and so
        // is a uid charged over another connection (it moves here).
        let need = |standing: &Standing| {
            let grow = bytes.saturating_sub(standing.set.unwrap_or(0));
            (grow > 0 || standing.new_uid || standing.moving > 0).then_some(grow)
        };
        let standing = inner.admit_as_it_stands(
            &self.limits,
            (conn, &args.uid),
            Some(board),
            hash,
            need,
            now,
        )?;
        let (new_uid, before) = (standing.new_uid, standing.set);
        let grow = bytes.saturating_sub(before.unwrap_or(0));
        let touched = inner.touches(&args.uid, conn, 0, now);
        inner.adopt(&args.uid, conn, now);
        let charge = inner
            .charges
            .entry(args.uid.clone())
            .or_insert_with(|| Charge::new(conn, now));
        match charge
            .boards
            .iter_mut()
            .find(|(b, h, _, _)| *b == board && *h == hash)
        {
            Some(record) => {
                record.2 += grow;
                // Found charged: the call it was charged for may keep what
                // it stored, whatever becomes of this one.
                record.3 = true;
            }
            None => charge.boards.push((board, hash, bytes, false)),
        }
        inner.total += grow;
        let usage = inner.usage.entry(conn).or_default();
        usage.bytes += grow;
        usage.locks += usize::from(new_uid);
        usage.touched = Some(now);
        Ok(BoardReserved {
            board,
            hash,
            before,
            touched,
        })
    }

    /// Takes back a [`reserve_board`](Self::reserve_board) whose call kept
    /// nothing on the boards, and the touch it made, unless something
    /// touched them since; a record another call found charged meanwhile
    /// stays (that call may keep what it stored), to lapse with the uid.
    pub(crate) fn undo_board(&self, uid: &str, reserved: BoardReserved) {
        let mut inner = self.inner();
        inner.set_board(uid, reserved);
        inner.untouch(uid, reserved.touched);
    }

    /// Takes back a reservation whose grant was refused, and the touch it
    /// made, unless something touched them since; a set it added that
    /// another request found charged meanwhile stays (that request may
    /// have been granted on it), to lapse if nothing stands on it. A refusal that still
    /// refreshed entries of the uid (a wait in quarantine) is followed by
    /// a [`touch`](Self::touch).
    pub(crate) fn undo(&self, uid: &str, reserved: Reserved) {
        let mut inner = self.inner();
        let before = match reserved {
            Reserved::Already(before, taken, grew) => {
                // Given back to the place alone, unless something touched
                // the uid since (a grant among it).
                if taken
                    && let Some(charge) = inner.charges.get_mut(uid)
                    && charge.touched == before.at
                    && let Some(set) = charge.sets.iter_mut().find(|s| s.hash == before.set)
                {
                    set.for_place = true;
                }
                // The growth goes back unless another request touched the
                // set since (it may have stored the longer owner and
                // source: the charge then stays, counting too much).
                if grew > 0 {
                    inner.shrink(uid, before.set, grew, before.at);
                }
                before
            }
            Reserved::Added(hash, before) => {
                // Another request of the uid that found the set charged
                // meanwhile may have been granted on it: the set then
                // stays, and lapses if nothing stands on it.
                let shared = inner
                    .charges
                    .get(uid)
                    .and_then(|charge| charge.sets.iter().find(|set| set.hash == hash))
                    .is_some_and(|set| set.shared);
                if !shared {
                    inner.remove(uid, Gone::Reserved(hash));
                }
                before
            }
        };
        inner.untouch(uid, before);
    }

    /// The lock table granted `uid` a place it waited in: its entry lives
    /// a validity from now, and so does its charge, with whichever
    /// connection it is charged to (its connection's task may forward the
    /// grant much later, or never).
    pub(crate) fn granted(&self, uid: &str, names: Option<&[String]>) {
        let now = Instant::now();
        let granted = names.map(|names| self.set_hash(names));
        let mut inner = self.inner();
        let Some(charge) = inner.charges.get_mut(uid) else {
            return;
        };
        charge.touched = now;
        // The granted wait's set (`names`, when its connection still knew
        // it) pays for entries from now. When it did not (it closed, and
        // its records went), the place's own end finds the grant and says
        // so (`end_places`); clearing every set's mark here would keep the
        // charge of the uid's other places past their end. Every set of
        // the uid is touched, as the grant may reach entries of the uid
        // granted under any.
        for set in &mut charge.sets {
            if granted == Some(set.hash) {
                set.for_place = false;
            }
            set.touched = now;
        }
        let conn = charge.conn;
        if let Some(usage) = inner.usage.get_mut(&conn) {
            usage.touched = Some(now);
        }
    }

    /// The lock table granted `args.uid` the set of `args` it waited for,
    /// when it asked again: the set's charge pays for its entries now.
    pub(crate) fn granted_set(&self, args: &LockArgs) {
        let hash = self.set_hash(&args.resources);
        let mut inner = self.inner();
        if let Some(charge) = inner.charges.get_mut(&args.uid)
            && let Some(set) = charge.sets.iter_mut().find(|set| set.hash == hash)
        {
            set.for_place = false;
        }
    }

    /// Whether `args.uid`'s charge for the set of `args` was made for a
    /// place in line and the set never granted since: it pays for no
    /// entry ([`SetCharge::for_place`]).
    pub(crate) fn for_place_alone(&self, args: &LockArgs) -> bool {
        let hash = self.set_hash(&args.resources);
        self.inner().charges.get(&args.uid).is_some_and(|charge| {
            charge
                .sets
                .iter()
                .any(|set| set.hash == hash && set.for_place)
        })
    }

    /// Records that `uid` was refreshed (or re-granted) over `conn` just now.
    /// Returns whether the uid was charged.
    /// Every set of the uid counts as touched: the call may have reached
    /// entries of any of them.
    pub(crate) fn touch(&self, conn: u64, uid: &str) -> bool {
        let now = Instant::now();
        let mut inner = self.inner();
        if let Some(charge) = inner.charges.get_mut(uid) {
            for set in &mut charge.sets {
                set.touched = now;
            }
        }
        inner.adopt(uid, conn, now)
    }

    /// [`touch`](Self::touch) after a call that granted or refreshed the
    /// uid's entries on the names of `args` alone: only the set of `args`
    /// counts as touched (any entry it refreshed of another set stands on
    /// its names, and this set's charge pays for it).
    pub(crate) fn touch_set(&self, conn: u64, args: &LockArgs) -> bool {
        let now = Instant::now();
        let hash = self.set_hash(&args.resources);
        let mut inner = self.inner();
        let Some(charge) = inner.charges.get_mut(&args.uid) else {
            return false;
        };
        match charge.sets.iter_mut().find(|set| set.hash == hash) {
            Some(set) => set.touched = now,
            None => charge.sets.iter_mut().for_each(|set| set.touched = now),
        }
        inner.adopt(&args.uid, conn, now)
    }

    /// Whether `args.uid` is charged for the set of names of `args`. A
    /// refresh that is not, and reaches entries the locker holds, is
    /// charged for them through [`reserve`](Self::reserve), within the
    /// limits, before the locker refreshes anything.
    pub(crate) fn covers(&self, args: &LockArgs) -> bool {
        let hash = self.set_hash(&args.resources);
        self.inner()
            .charges
            .get(&args.uid)
            .is_some_and(|charge| charge.sets.iter().any(|set| set.hash == hash))
    }

    /// Drops the charge of `uid` for `resources` after a release; with
    /// `None`, every set and proclamation of the uid (a force-unlock of the
    /// uid everywhere), but not its watches, which the locker keeps until
    /// they fire or lapse.
    /// A release naming another set than the one granted keeps the charge
    /// until it lapses, since entries may remain.
    ///
    /// A proclamation goes only where its entry went: see
    /// [`release_proclamations`](Self::release_proclamations).
    pub(crate) fn release(&self, uid: &str, resources: Option<&[String]>) {
        let gone = resources.map_or(Gone::Locks, |r| Gone::Set(self.set_hash(r)));
        self.inner().remove(uid, gone);
    }

    /// Whether `uid` is charged for a leader's proclamation: only then
    /// does a release look for the names it left.
    pub(crate) fn proclaims(&self, uid: &str) -> bool {
        self.inner().charges.get(uid).is_some_and(|charge| {
            charge
                .boards
                .iter()
                .any(|(board, _, _, _)| *board == Board::Proclamation)
        })
    }

    /// Drops the proclamations of `uid` on `names`, which it no longer
    /// holds: the locker drops a proclamation with the entry it was made
    /// with (a release in the other mode, or of other names, leaves it).
    pub(crate) fn release_proclamations(&self, uid: &str, names: &[String]) {
        let mut inner = self.inner();
        for name in names {
            let hash = self.set_hash(std::slice::from_ref(name));
            inner.remove(uid, Gone::Proclamation(hash));
        }
    }

    /// [`release`](Self::release) of the set `resources` of `uid`, only
    /// while `uid` is charged to `conn`: checked under the ledger's mutex,
    /// so that a connection that took the charge over since (its waiter
    /// asked again there, finding this set charged) settles it itself.
    pub(crate) fn release_if_charged_to(&self, uid: &str, resources: &[String], conn: u64) {
        let hash = self.set_hash(resources);
        let mut inner = self.inner();
        if inner.charges.get(uid).is_some_and(|c| c.conn == conn) {
            inner.remove(uid, Gone::Set(hash));
        }
    }

    /// Drops what a place of `uid` on `resources` was charged beside its
    /// entries there ([`reserve_beside`](Self::reserve_beside)), while
    /// `uid` is charged to `conn`: the place ended, the entries stay.
    pub(crate) fn release_beside_if_charged_to(&self, uid: &str, resources: &[String], conn: u64) {
        let hash = beside(self.set_hash(resources));
        let mut inner = self.inner();
        if inner.charges.get(uid).is_some_and(|c| c.conn == conn) {
            inner.remove(uid, Gone::Reserved(hash));
        }
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

    /// Whether anything is charged to the connection: a lock, a place in
    /// line, a proclamation or a watch. Once the latest of its charges
    /// lapsed (their entries expired), they are dropped, so that a client
    /// that fell silent after its locks expired holds nothing: a scan of
    /// the charges, once per such connection.
    pub(crate) fn holds(&self, conn: u64) -> bool {
        let mut inner = self.inner();
        let held = |inner: &Inner| {
            inner
                .usage
                .get(&conn)
                .is_some_and(|usage| usage.locks > 0 || usage.bytes > 0)
        };
        if !held(&inner) {
            return false;
        }
        let now = Instant::now();
        let (validity, lapse) = (self.limits.validity, self.limits.lapse);
        // A charge of it touched within the validity: that one is live.
        // Touched longer ago, its newest charge has lapsed, and so has
        // every other: it holds nothing live, whether or not the prune
        // below has removed them yet.
        let touched = inner.usage.get(&conn).and_then(|usage| usage.touched);
        if let Some(at) = touched
            && now.saturating_duration_since(at) < validity
        {
            return true;
        }
        let lapsed_all = touched.is_some();
        // Its entries have all expired: it holds nothing live. Their charges
        // stay until the locker's expiry pass has dropped them from memory
        // too (`Limits::lapse`), and go with the server's next prune of
        // every lapsed charge, at most one walk of all charges per
        // validity/60 for the whole server (a walk per idle connection,
        // under this one mutex, let hundreds of connections keep every call
        // waiting for seconds).
        let due = inner.next_prune.is_none_or(|at| now >= at);
        if due {
            inner.prune(now, lapse);
            inner.next_prune = Some(prune_after(now, validity));
        }
        !lapsed_all && held(&inner)
    }

    /// Drops the charges that lapsed, once every validity (at most a
    /// minute): called by the server's expiry timer, so that a server
    /// nobody calls stops counting (and keeping the records of) locks that
    /// expired there; a charge goes within a validity (at most a minute)
    /// of its lapse. Each sweep walks every charge, under the mutex every
    /// call takes, hence the slow pace.
    pub(crate) fn sweep(&self) {
        const SLOWEST: Duration = Duration::from_secs(60);
        let now = Instant::now();
        let mut inner = self.inner();
        if inner.next_sweep.is_some_and(|at| now < at) {
            return;
        }
        inner.next_sweep = Some(after(now, self.limits.validity.min(SLOWEST)));
        inner.prune(now, self.limits.lapse);
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

/// Gives back room a uid's list of charged sets or board records no longer
/// uses: a uid's sets may number a thousand and then one, and a lock's
/// allowance counts room for a few.
fn fit_list<T>(list: &mut Vec<T>) {
    if list.capacity() > 4 * list.len().max(1) {
        list.shrink_to(list.len() * 2);
    }
}

/// The key under which a place that a uid keeps beside its own entries on
/// the set of names of hash `set` is charged: apart from the set's own
/// charge, and given back with it. The hashes are keyed per process, so a
/// client cannot make another set's hash collide with it.
fn beside(set: u64) -> u64 {
    set ^ 0x9e37_79b9_7f4a_7c15
}

/// When the next prune of lapsed charges is due after one at `now`: a
/// sixtieth of the validity later (never, for a validity too long for the
/// clock to count: nothing lapses then anyway).
fn prune_after(now: Instant, validity: Duration) -> Instant {
    after(now, validity / 60)
}

#[cfg(test)]
mod tests;
