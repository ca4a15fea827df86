//! Reproduces a past break: `waiting()` said `None` while a wait was still in its first poll (held up on another thread), once a `try_lock` through a clone of the handle had begun and ended meanwhile.
//!
//! `DRWMutex::waiting` (src/lock/mutex.rs): "`None` when no wait of this
//! handle is running ... when several run at once through the same
//! handle, the one that began last among those still running reports".
//!
//! The scene: three lockers; "x" holds "res". "w" waits for it on a
//! runtime of its own thread, and its first poll is held up inside the
//! call to one locker (a `Relay` that takes its time before it forwards),
//! after its round began. While it is held up, `waiting()` reads the
//! wait (the first-poll slot of the board shows it). Then a clone of the
//! handle makes one `try_lock` round on the test's thread: refused
//! (`WouldBlock`), it ends in its first poll. The wait is still running
//! (still in that first poll), and no other wait of the handle runs, yet
//! `waiting()` now says `None`.
//!
//! Suspected cause: the board keeps one first-poll slot
//! (src/lock/wait_watch.rs, `WaitBoard::in_first_poll`): the `try_lock`'s
//! round overwrote the wait's there, and the `try_lock`'s end
//! (`BoardWatch::drop` -> `first_poll_over`) emptied it, so the wait that
//! is still in its first poll is on the board nowhere.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common;
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, Error, NetLocker};

const SEED: u64 = 38_101;

#[test]
fn waiting_sees_a_wait_in_its_first_poll_after_a_later_try_lock_ended() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let slow = Arc::new(AtomicBool::new(false));
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let entered_tx = Mutex::new(entered_tx);
    let go_rx = Arc::new(Mutex::new(go_rx));
    let mut nodes = cluster.net_lockers();
    let first = nodes.remove(0);
    let switch = slow.clone();
    let go = go_rx.clone();
    let held_up: Arc<dyn NetLocker> = Arc::new(Relay::new(first, move |kind, _| {
        if kind == CallKind::Lock && switch.swap(false, Ordering::SeqCst) {
            let _ = entered_tx.lock().unwrap().send(());
            // Bounded: the test thread answers within a few seconds.
            let _ = go.lock().unwrap().recv_timeout(Duration::from_secs(10));
        }
        Route::Forward
    }));
    nodes.push(held_up);
    let w = Dsync::builder(nodes)
        .owner("w")
        .rng_seed(SEED)
        .build()
        .expect("valid coordinator");
    let x = common::seeded(cluster.net_lockers(), "x", SEED + 1);
    let main = common::runtime();
    let held = main.block_on(async { x.rw_mutex(["res"]).unwrap().lock().await.unwrap() });

    let mutex = w.rw_mutex(["res"]).unwrap();
    let waiter = mutex.clone();
    slow.store(true, Ordering::SeqCst);
    let thread = std::thread::spawn(move || {
        let rt = common::runtime();
        rt.block_on(async move {
            tokio::time::timeout(Duration::from_secs(2), waiter.lock())
                .await
                .map_err(|_| Error::Timeout)
                .and_then(|r| r)
                .map(std::mem::forget)
                .is_ok()
        })
    });
    entered_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the first poll reached the held-up call");
    let before = mutex.waiting().map(|s| s.reason());

    // A one-round try through a clone, while the wait is still in its
    // first poll: it begins after the wait, and ends at once.
    let trier = mutex.clone();
    let tried = main.block_on(async move { trier.try_lock().await.map(drop) });
    let during = mutex.waiting().map(|s| (s.reason(), s.to_string()));

    go_tx.send(()).expect("the call goes on");
    let granted = thread.join().expect("the waiting thread ends");
    drop(held);
    eprintln!(
        "before the try_lock: {before:?}; try_lock gave {tried:?}; after it, the wait \
         still in its first poll: {during:?}; wait granted {granted}"
    );
    assert!(
        before.is_some(),
        "the wait in its first poll is seen at first"
    );
    assert!(
        matches!(tried, Err(Error::WouldBlock)),
        "x holds res: {tried:?}"
    );
    assert!(!granted, "x held the lock throughout");
    assert!(
        during.is_some(),
        "the wait of this handle was still running (in its first poll, its round sent) \
         and nothing else of the handle ran, yet after a clone's try_lock ended waiting() \
         said None, \"no wait of this handle is running\""
    );
}
