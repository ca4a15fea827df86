//! What the lock server's memory budget charges for a lock table:
//! `NAME_OVERHEAD` for each name a request covers and `SHARD_KEPT` for
//! each shard, derived from the sizes of the table's parts so that they
//! follow them. Both are upper bounds: the budget never undercounts.

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState;

use super::by_refresh::Node;
use super::memory::{block, SLAB_KEPT};
use super::name::Name;
use super::readers::INDEXED;
use super::{Entry, Place, Resource};
use crate::locker::wait::Ticket;

/// What a shard keeps at most while (nearly) empty: its map at 32 buckets
/// (a slot and a control byte each, and 16 more control bytes) and its
/// slab at [`SLAB_KEPT`] nodes.
#[cfg_attr(not(feature = "net"), allow(dead_code))]
pub(crate) const SHARD_KEPT: usize = block(32 * (std::mem::size_of::<(Name, Resource)>() + 1) + 16)
    + block(SLAB_KEPT * std::mem::size_of::<Node>());

/// The most the table's memory grows by, at its worst, for each name a
/// request covers, besides the name's own bytes; the lock server charges
/// this much per name (it once charged 256 bytes while a short name
/// took about 590). Derived from the sizes of the table's parts, so that it
/// follows them, and checked against a counting allocator by
/// `tests/net_memory.rs`:
///
/// * the name's slot in its shard's map, at the map's lowest load: 3/8
///   full (see [`SLAB_KEPT`]; a map below [`MAP_KEPT`](super::memory::MAP_KEPT) names is in
///   [`SHARD_KEPT`] instead);
/// * the key: a list of its own holding the name, and malloc's rounding of
///   the name's bytes (at most 31 bytes past its length);
/// * then the larger of what an entry and a place add:
///   - an entry: its node in the expiry slab, and a reader's record in the
///     holders' list, both in vectors at least half full (so twice their
///     size), and its slot in the readers' index by uid, in a map at least
///     3/8 full (a name's index is dropped below 16 readers, which fill at
///     least half of the smallest index, 32 buckets);
///   - a place: its record in the line, in a vector at least half full, its
///     share of the request's list of names, which the place keeps alive
///     (the string header and malloc's rounding of the name's bytes), and
///     its slot in the line's index by uid, in a map at least 3/8 full,
///     with its share of the boxed map's header (a line keeps an index
///     only while at least 16 places stand in it).
#[cfg_attr(not(feature = "net"), allow(dead_code))]
pub(crate) const NAME_OVERHEAD: usize = {
    let slot = ((std::mem::size_of::<(Name, Resource)>() + 1) * 8).div_ceil(3);
    let key = block(2 * std::mem::size_of::<usize>() + std::mem::size_of::<String>()) + 31;
    let indexed = ((std::mem::size_of::<(Arc<str>, usize)>() + 1) * 8).div_ceil(3);
    let entry = 2 * std::mem::size_of::<Node>() + 2 * std::mem::size_of::<Entry>() + indexed;
    let in_line = ((std::mem::size_of::<(Arc<str>, Ticket)>() + 1) * 8).div_ceil(3)
        + block(std::mem::size_of::<HashMap<Arc<str>, Ticket, RandomState>>())
            .div_ceil(INDEXED / 2);
    let place = 2 * std::mem::size_of::<Place>() + std::mem::size_of::<String>() + 31 + in_line;
    slot + key + if entry > place { entry } else { place }
};
