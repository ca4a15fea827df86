//! What a lock and unlock allocate, counted by a global allocator: in
//! process, the coordinator's calls to lockers that answer at once
//! (`ImmediateLocker`) allocate nothing per locker; over TCP, the count is
//! kept from growing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use quorum_lock::{Dsync, LocalLocker, NetLocker};

/// Counts the allocations of the thread that makes them.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is passed to the system allocator unchanged; the
// counter is a const-initialised thread local without a destructor.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Allocations of this thread per lock and unlock of `mutex`, averaged
/// over `cycles` after a warm-up of 200.
async fn per_lock_and_unlock(mutex: &quorum_lock::DRWMutex, cycles: u64) -> f64 {
    for _ in 0..200 {
        cycle(mutex).await;
    }
    let before = allocations();
    for _ in 0..cycles {
        cycle(mutex).await;
    }
    (allocations() - before) as f64 / cycles as f64
}

async fn cycle(mutex: &quorum_lock::DRWMutex) {
    mutex
        .lock()
        .await
        .expect("free")
        .unlock()
        .await
        .expect("released");
}

/// Allocations per lock and unlock of one name on `lockers` in-process
/// lockers, averaged over `cycles` after a warm-up.
fn per_cycle(lockers: usize, cycles: u64) -> f64 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let nodes: Vec<Arc<dyn NetLocker>> = (0..lockers)
            .map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>)
            .collect();
        let ds = Dsync::new(nodes).expect("a cluster");
        let mutex = ds.rw_mutex(["reports"]).expect("a name");
        per_lock_and_unlock(&mutex, cycles).await
    })
}

#[test]
fn in_process_lockers_cost_no_allocation_per_call() {
    let one = per_cycle(1, 2_000);
    let five = per_cycle(5, 2_000);
    eprintln!("allocations per lock and unlock: 1 locker {one:.2}, 5 lockers {five:.2}");
    // A future per locker call (two per locker and cycle before the
    // immediate path) would add at least 8 for the four extra lockers.
    assert!(
        five - one < 2.0,
        "each extra locker costs allocations: {one:.2} with 1 locker, {five:.2} with 5"
    );
    // 31 with 5 lockers before the immediate path; 14 with it; 3 once
    // per-locker state sat inline and the loss token and the wait's watch
    // were made only when needed; 2 since the guard's loss signal lives in
    // the acquisition: the acquisition and its uid's `Arc<str>` (plus the
    // locker's released-uid record as it grows, a few hundredths).
    assert!(
        five < 2.5,
        "{five:.2} allocations per lock and unlock on 5 lockers (2 expected: the acquisition and its uid)"
    );
}

/// Allocations per lock and unlock of one name over TCP, on the caller's
/// thread: five trivial servers (they answer every request at once) on a
/// runtime of their own, the client on a current-thread runtime, so that
/// only the client's allocations are counted.
#[cfg(all(feature = "net", feature = "testing"))]
fn per_cycle_over_tcp(cycles: u64) -> f64 {
    use quorum_lock::net::{RemoteConfig, RemoteLocker};

    let servers = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime for the servers");
    let mut addrs = Vec::new();
    for _ in 0..5 {
        let listener = servers
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("a loopback port");
        addrs.push(listener.local_addr().expect("its address").to_string());
        servers.spawn(quorum_lock::net::ceiling::serve(listener, "token".into()));
    }
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    client.block_on(async {
        let mut nodes: Vec<Arc<dyn NetLocker>> = Vec::new();
        for addr in &addrs {
            let locker = RemoteLocker::connect(addr, RemoteConfig::new("token"))
                .await
                .expect("a trivial server welcomes");
            nodes.push(Arc::new(locker));
        }
        let ds = Dsync::new(nodes).expect("a cluster");
        let mutex = ds.rw_mutex(["reports"]).expect("a name");
        per_lock_and_unlock(&mutex, cycles).await
    })
}

/// Keeps the client's allocations over TCP from growing: about two per
/// locker call (the coordinator's boxed call, the `NetLocker` method's
/// boxed future; a call's reply waits in a slot of its connection's table,
/// with no channel of its own) and about ten per lock and unlock besides:
/// 32–40 in all on 5 servers (2026-12-04; more when more calls are still on
/// their way at a quorum and go on in a task, which depends on the
/// machine's timing). With a reply channel per call the same runs counted
/// ten more (49.1–49.5 against 39.5–40.0, side by side). On a
/// multi-threaded runtime these are often freed on another worker than the
/// one that made them, which is what costs (BENCHMARKS.md, "Where our
/// client's time goes").
#[cfg(all(feature = "net", feature = "testing"))]
#[test]
fn a_lock_over_tcp_allocates_no_more_than_it_did() {
    let per = per_cycle_over_tcp(2_000);
    eprintln!("allocations per lock and unlock over TCP on 5 servers: {per:.2}");
    // One more allocation per locker call would add 10.
    assert!(
        per < 46.0,
        "{per:.2} allocations per lock and unlock over TCP on 5 servers (32 to 40 expected)"
    );
}
