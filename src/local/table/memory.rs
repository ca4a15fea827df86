//! What a shard keeps after a peak: the shrink rules of the table's maps
//! and vectors, and the sizes below which they keep their room. Each
//! shrink costs O(1) amortised over the changes since the last one; the
//! table's `NAME_OVERHEAD` and `SHARD_KEPT` charge for what they keep.

/// Memory kept after a peak: the table's maps and vectors give
/// back room that their entries no longer use, so what a shard keeps
/// follows what it holds now, not the most it ever held. Each shrinks only
/// once it has lost a constant share of its room, to a size a constant
/// share away from growing again, so a resize costs O(1) amortised over
/// the insertions and removals since the last one, and no call does O(n)
/// work that it has not paid for. The loads they keep are the ones
/// [`NAME_OVERHEAD`](super::NAME_OVERHEAD) charges for:
///
/// * a vector (an expiry slab, a name's readers, a name's line) grows by
///   half when full, so it is at least 2/3 full after growing, and shrinks
///   to 1.5 times its length when it falls below half full: at least half
///   full, twice its items' size at most;
/// * a shard's map (whose bucket counts are powers of two) doubles when
///   7/8 full, to 7/16, and shrinks when below 3/8 full, by a half or more,
///   to between 7/18 and 7/9 full: at least 3/8 full, 8/3 slots per name.
///   Its load is counted against the room of its buckets, tombstones
///   included, which `HashMap::capacity()` leaves out, and checked after
///   inserts too, since an insert that finds the room taken by tombstones
///   doubles the buckets (see [`BucketMap`](super::BucketMap)).
///
/// Below these sizes a shard keeps its room, so that a shard that holds a
/// lock now and then does not allocate on every call: a map of at most
/// [`MAP_KEPT`] names and a slab of [`SLAB_KEPT`] nodes. [`SHARD_KEPT`](super::SHARD_KEPT) is
/// what that costs at most, which the server's memory budget adds to its
/// table's cap.
pub(super) const SLAB_KEPT: usize = 32;

/// The capacity of a map of 32 buckets: see [`SLAB_KEPT`].
pub(super) const MAP_KEPT: usize = 28;

/// Makes room for one more item in `v`, growing it by half when full.
pub(super) fn room<T>(v: &mut Vec<T>) {
    if v.len() == v.capacity() {
        v.reserve_exact((v.len() / 2).max(1));
    }
}

/// Gives back the room of `v` once it is less than half full, keeping
/// room for half its length again: see [`SLAB_KEPT`].
pub(super) fn fit<T>(v: &mut Vec<T>) {
    if v.len() * 2 < v.capacity() {
        v.shrink_to(v.len() + v.len() / 2);
    }
}

/// Whether a map (or a vector) of capacity `capacity` holding `len` items
/// should shrink: over [`MAP_KEPT`], and less than 3/8 of its buckets (3/7
/// of its capacity, which is 7/8 of them) in use.
#[cfg_attr(not(feature = "net"), allow(dead_code))]
pub(crate) fn map_sparse(len: usize, capacity: usize) -> bool {
    capacity > MAP_KEPT && len * 7 < capacity * 3
}

/// The size to shrink a sparse map of `len` names to: room for 1/8 more,
/// which halves its buckets at least (9/8 · 8/7 · 3/8 < 1/2) and leaves
/// it at most 7/9 full.
#[cfg_attr(not(feature = "net"), allow(dead_code))]
pub(crate) fn map_shrunk(len: usize) -> usize {
    len + len / 8
}

/// What glibc's malloc takes for a block of `size` bytes: an 8-byte header,
/// 16-byte granules, 32 bytes at least.
#[cfg_attr(not(feature = "net"), allow(dead_code))]
pub(crate) const fn block(size: usize) -> usize {
    let rounded = (size + 8 + 15) & !15;
    if rounded < 32 {
        32
    } else {
        rounded
    }
}
