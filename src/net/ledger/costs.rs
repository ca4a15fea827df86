//! What the server stores for a lock, a place, a proclamation or a
//! watch, in bytes: the charges the ledger counts against its limits, each
//! an upper bound checked with a counting allocator by
//! `tests/net_memory.rs`.

use std::sync::Arc;

use super::{BoardRecord, Charge, SetCharge, Usage};
use crate::local::{
    block, BOARDS_KEPT, NAME_OVERHEAD, PROCLAMATION_OVERHEAD, TABLE_KEPT, WATCH_OVERHEAD,
};
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
        + block(4 * std::mem::size_of::<SetCharge>());
    strings + record + block(2 * std::mem::size_of::<usize>())
};

/// What the lock table and this ledger keep at most beyond the charges of
/// the locks they hold now: their maps' and slabs' room while (nearly)
/// empty, which they keep rather than allocate on every call (see
/// `SLAB_KEPT` in `src/local/table.rs`). Everything else they keep after a
/// peak is given back, so that memory follows the charges of the locks
/// held now; [`ServerConfig::memory_budget`](crate::net::ServerConfig::memory_budget)
/// adds this to the table's cap.
pub(crate) const KEPT: usize = TABLE_KEPT
    + BOARDS_KEPT
    + block(32 * (std::mem::size_of::<(Arc<str>, Charge)>() + 1) + 16)
    + block(32 * (std::mem::size_of::<(u64, Usage)>() + 1) + 16);

/// Bytes the server stores for a lock with `args`: each name with its entry,
/// plus uid, owner and source once (entries share them). Each name's bytes
/// count twice: the table's key for a name may be another request's copy
/// (a request of several names gets a copy of its own; one name is keyed
/// by the list of the request that first named it, which stays as long as
/// anyone holds or waits there), and a place in line keeps its own
/// request's list alive beside it. A place and the lock it turns into
/// share one charge, so a lock is charged as its place would be.
pub(crate) fn lock_bytes(args: &LockArgs) -> usize {
    let names: usize = args
        .resources
        .iter()
        .map(|r| 2 * r.len() + ENTRY_OVERHEAD)
        .sum();
    names + args.uid.len() + args.owner.len() + args.source.len() + LOCK_OVERHEAD
}

/// What this ledger keeps for one record of an election board beside a
/// uid's charge: its slot in the charge's list, which may have twice the
/// room it uses; and, since a watch or a proclamation may be all a uid
/// has here, the ledger's record of the uid itself as [`LOCK_OVERHEAD`]
/// counts it for a lock (its map slot at the map's lowest load, the list
/// of boards starting with room for four, the uid's string header).
/// Charging that for every board record overcharges a uid that also
/// holds locks, which errs on the side of the cap.
const BOARD_RECORD: usize = 2 * std::mem::size_of::<BoardRecord>()
    + ((std::mem::size_of::<(Arc<str>, Charge)>() + 1) * 8).div_ceil(3)
    + block(4 * std::mem::size_of::<BoardRecord>())
    + 2 * std::mem::size_of::<usize>()
    + 8
    + 15;

/// Bytes the server stores for a proclamation of `value_len` bytes made
/// with `args`: the value, the resource name and the uid (the boards keep
/// copies of their own), plus [`PROCLAMATION_OVERHEAD`].
pub(crate) fn proclamation_bytes(args: &LockArgs, value_len: usize) -> usize {
    let names: usize = args.resources.iter().map(String::len).sum();
    value_len + names + args.uid.len() + PROCLAMATION_OVERHEAD + BOARD_RECORD
}

/// Bytes the server stores for a watch registered with `args`: the
/// resource name and the observer's uid, plus [`WATCH_OVERHEAD`].
pub(crate) fn watch_bytes(args: &LockArgs) -> usize {
    let names: usize = args.resources.iter().map(String::len).sum();
    names + args.uid.len() + WATCH_OVERHEAD + BOARD_RECORD
}
