//! A global allocator for the library's tests that counts, per thread,
//! what `allocated` asks it to: the bytes a map takes, to count its
//! buckets.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Counts what a thread allocates while its `COUNTING` is set.
struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static COUNTED: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = COUNTING.try_with(|c| {
            if c.get() {
                let _ = COUNTED.try_with(|n| n.set(n.get() + layout.size()));
            }
        });
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes `f` allocates on this thread (and keeps until it returns).
pub(super) fn allocated<T>(f: impl FnOnce() -> T) -> usize {
    COUNTED.with(|n| n.set(0));
    COUNTING.with(|c| c.set(true));
    let kept = f();
    COUNTING.with(|c| c.set(false));
    drop(kept);
    COUNTED.with(|n| n.get())
}

/// The buckets of `map`, counted from the bytes a clone of it allocates:
/// one slot and one control byte a bucket, and a group's 16 control bytes
/// more. Unlike `HashMap::capacity()`, this counts the buckets that
/// tombstones take.
pub(super) fn buckets<K: Clone, V: Clone, S: Clone>(
    map: &std::collections::HashMap<K, V, S>,
) -> usize {
    let bytes = allocated(|| map.clone());
    bytes.saturating_sub(16) / (std::mem::size_of::<(K, V)>() + 1)
}
