//! The record of releases a restarted `LocalLocker` keeps during its
//! quarantine stays within the 8 MiB that docs/lock-servers.md promises
//! ("up to 8 MiB more"), counted by a global allocator in live bytes.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use quorum_lock::{LocalLocker, LockArgs, NetLocker};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; the
// counter is a plain atomic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::SeqCst);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::SeqCst);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::SeqCst);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

const PROMISED: isize = 8 << 20;

/// The counter is process-wide: one measurement at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Live bytes the locker holds more after releasing `count` unknown uids of
/// `len` bytes in quarantine (what a client with the token can send).
fn growth_after_releases(count: usize, len: usize) -> isize {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let locker = LocalLocker::new();
        locker.restart();
        let mut args = LockArgs {
            uid: "warm".into(),
            resources: vec!["r".to_string()].into(),
            owner: "o".into(),
            source: "s".into(),
            quorum: 1,
        };
        locker.unlock(&args).await.expect("a valid release");
        let before = LIVE.load(Ordering::SeqCst);
        for i in 0..count {
            let mut uid = format!("{i:x}-");
            while uid.len() < len {
                uid.push('u');
            }
            args.uid = uid.into();
            locker.unlock(&args).await.expect("a valid release");
        }
        let grown = LIVE.load(Ordering::SeqCst) - before;
        drop(locker);
        grown
    })
}

#[test]
fn releases_recorded_in_quarantine_stay_within_eight_mib() {
    for (count, len) in [(200_000, 128), (300_000, 8)] {
        let grown = growth_after_releases(count, len);
        assert!(
            grown <= PROMISED,
            "the record of releases holds {grown} bytes (> {PROMISED}) after {count} releases \
             of {len}-byte uids in quarantine"
        );
    }
}
