//! Storage with one element per locker, kept inline (in the acquisition,
//! the round or the release that owns it) up to [`INLINE`] lockers, so
//! that a lock and unlock on the usual cluster sizes need no allocation
//! for it; larger clusters spill to the heap.

use smallvec::SmallVec;

/// Lockers kept inline: clusters of up to 8, which covers the usual 1 to 7.
pub(crate) const INLINE: usize = 8;

/// One `T` per locker, inline up to [`INLINE`] lockers.
pub(crate) type PerLocker<T> = SmallVec<[T; INLINE]>;
