//! The record of releases a restarted `LocalLocker` keeps during its
//! quarantine stays within the 8 MiB that docs/lock-servers.md promises
//! ("up to 8 MiB more"), counted by a global allocator in live bytes.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use quorum_lock::{LocalLocker, LockArgs, LockerConfig, NetLocker};

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

/// docs/lock-servers.md (Memory budget): the uids released during the
/// quarantine are kept "up to 8 MiB more, forgotten when the quarantine
/// ends". Here a restarted locker records 300,000 releases of 8-byte uids
/// in its quarantine; once the quarantine is over (paused time) and the
/// locker serves ordinary calls again, what it still holds for them is
/// counted.
#[test]
fn releases_recorded_in_quarantine_are_forgotten_when_it_ends() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let (recorded, kept) = runtime.block_on(async {
        let locker = LocalLocker::new();
        let mut args = LockArgs {
            uid: "warm".into(),
            resources: vec!["r".to_string()].into(),
            owner: "o".into(),
            source: "s".into(),
            quorum: 1,
        };
        locker.restart();
        locker.unlock(&args).await.expect("a valid release");
        let before = LIVE.load(Ordering::SeqCst);
        for i in 0..300_000usize {
            args.uid = format!("{i:07x}-").into();
            locker.unlock(&args).await.expect("a valid release");
        }
        let recorded = LIVE.load(Ordering::SeqCst) - before;
        // The record is kept a validity past the quarantine's end, for a
        // refresh that read the clock just before it.
        tokio::time::advance(
            locker.quarantine()
                + LockerConfig::default().validity
                + std::time::Duration::from_secs(1),
        )
        .await;
        assert!(!locker.is_quarantined(), "the quarantine must be over");
        // Ordinary calls after the quarantine: a lock, its release, and a
        // release of a uid nothing holds.
        args.uid = "after".into();
        assert!(locker
            .lock(&args)
            .await
            .expect("a lock after the quarantine"));
        assert!(locker.unlock(&args).await.expect("its release"));
        args.uid = "unknown".into();
        let _ = locker.unlock(&args).await;
        let kept = LIVE.load(Ordering::SeqCst) - before;
        drop(locker);
        (recorded, kept)
    });
    assert!(
        kept <= (1 << 20),
        "once the quarantine ended the locker still holds {kept} bytes for the releases it \
         recorded in it ({recorded} bytes while in quarantine); the docs say they are forgotten \
         when the quarantine ends"
    );
}
