//! `DRWMutex::waiting` (src/lock/mutex.rs): "Why the latest wait of this
//! handle (or a clone of it) is not granted yet ... `None` when no wait of
//! this handle is running. Waits (`lock`, `read` and their `_timeout`
//! forms) report here, and so do one-round `try_` calls while their round
//! runs; when several run at once through the same handle, the one that
//! began last among those still running reports."
//!
//! The scene: three lockers; "x" holds "res". "w" waits for it (or makes
//! one `try_lock` round) on a runtime of its own thread. Its round's call
//! to w's third locker is slow to leave: that locker's link (a `Relay`
//! whose route is decided inside the call) takes its time before it
//! forwards, inside the first poll, after the calls to the other two went
//! out. `waiting()` is read from the test's thread then.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::common;
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{DRWMutex, Dsync, Error, NetLocker, WaitReason, WriteGuard};

#[derive(Clone, Copy, Debug)]
enum Form {
    Wait,
    TryLock,
}

/// "w"'s handle, its wait or try held up inside its first poll on a thread
/// of its own, while "x" holds "res" (dropped last).
struct HeldUp {
    mutex: DRWMutex,
    main: tokio::runtime::Runtime,
    go: mpsc::Sender<()>,
    thread: JoinHandle<bool>,
    _held: WriteGuard,
}

impl HeldUp {
    fn start(seed: u64, form: Form) -> Self {
        eprintln!("seed {seed}, form {form:?}");
        let cluster = TestCluster::new(3, seed);
        let slow = Arc::new(AtomicBool::new(false));
        let (entered_tx, entered_rx) = mpsc::channel::<()>();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let entered_tx = Mutex::new(entered_tx);
        let go_rx = Mutex::new(go_rx);
        let mut nodes = cluster.net_lockers();
        // The held-up link last, so that the calls to the other two
        // lockers went out when it holds up the first poll.
        let first = nodes.remove(0);
        let switch = slow.clone();
        let held_up: Arc<dyn NetLocker> = Arc::new(Relay::new(first, move |kind, _| {
            if kind == CallKind::Lock && switch.swap(false, Ordering::SeqCst) {
                let _ = entered_tx.lock().unwrap().send(());
                // Bounded: the test thread answers within a few seconds.
                let _ = go_rx.lock().unwrap().recv_timeout(Duration::from_secs(10));
            }
            Route::Forward
        }));
        nodes.push(held_up);
        let w = Dsync::builder(nodes)
            .owner("w")
            .rng_seed(seed)
            .build()
            .expect("valid coordinator");
        let x = common::seeded(cluster.net_lockers(), "x", seed + 1);
        let main = common::runtime();
        let held = main.block_on(async { x.rw_mutex(["res"]).unwrap().lock().await.unwrap() });
        let mutex = w.rw_mutex(["res"]).unwrap();
        let waiter = mutex.clone();
        slow.store(true, Ordering::SeqCst);
        let thread = std::thread::spawn(move || {
            let rt = common::runtime();
            rt.block_on(async move {
                let r = match form {
                    Form::Wait => tokio::time::timeout(Duration::from_secs(2), waiter.lock())
                        .await
                        .map_err(|_| Error::Timeout)
                        .and_then(|r| r),
                    Form::TryLock => waiter.try_lock().await,
                };
                r.map(std::mem::forget).is_ok()
            })
        });
        entered_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the first poll reached the held-up call");
        HeldUp {
            mutex,
            main,
            go: go_tx,
            thread,
            _held: held,
        }
    }

    /// Lets the held-up call go on, and checks that the wait or try was
    /// not granted.
    fn finish(self) {
        self.go.send(()).expect("the call goes on");
        let granted = self.thread.join().expect("the waiting thread ends");
        assert!(!granted, "x held the lock throughout");
    }
}

/// Reproduces a past break: `waiting()` read from another thread while a
/// wait's first poll (or a `try_lock`'s round) was still running said
/// `None`: the wait's watch was posted on the board only once its
/// acquire returned `Pending`.
fn read_during_the_first_poll(seed: u64, form: Form) {
    let scene = HeldUp::start(seed, form);
    let during = scene.mutex.waiting().map(|s| (s.reason(), s.to_string()));
    scene.go.send(()).expect("the call goes on");
    std::thread::sleep(Duration::from_millis(100));
    let after = scene.mutex.waiting().map(|s| s.reason());
    let granted = scene.thread.join().expect("the waiting thread ends");
    eprintln!("during the first poll: {during:?}; 100 ms later: {after:?}; granted {granted}");
    assert!(!granted, "x held the lock throughout");
    if let Form::Wait = form {
        assert_eq!(
            after,
            Some(WaitReason::HeldElsewhere),
            "once the first poll returned, the wait reads as held elsewhere"
        );
    }
    assert!(
        during.is_some(),
        "a {form:?} of this handle was running (its round sent, two of three lockers \
         holding the lock elsewhere) when waiting() was read from another thread, yet it \
         said None, \"no wait of this handle is running\""
    );
}

#[test]
fn waiting_read_from_another_thread_during_a_waits_first_poll_sees_the_wait() {
    read_during_the_first_poll(36_411, Form::Wait);
}

#[test]
fn waiting_read_from_another_thread_during_a_try_locks_round_sees_the_round() {
    read_during_the_first_poll(36_412, Form::TryLock);
}

/// Reproduces a past break: `waiting()` said `None` while a wait was still
/// in its first poll, once a `try_lock` through a clone of the handle had
/// begun and ended meanwhile: the board's one first-poll slot was taken
/// by the try's round and emptied at its end.
#[test]
fn waiting_sees_a_wait_in_its_first_poll_after_a_later_try_lock_ended() {
    let scene = HeldUp::start(38_101, Form::Wait);
    let before = scene.mutex.waiting().map(|s| s.reason());
    // A one-round try through a clone, while the wait is still in its
    // first poll: it begins after the wait, and ends at once.
    let trier = scene.mutex.clone();
    let tried = scene
        .main
        .block_on(async move { trier.try_lock().await.map(drop) });
    let during = scene.mutex.waiting().map(|s| (s.reason(), s.to_string()));
    scene.finish();
    eprintln!("before the try_lock: {before:?}; try_lock gave {tried:?}; after it: {during:?}");
    assert!(
        before.is_some(),
        "the wait in its first poll is seen at first"
    );
    assert!(
        matches!(tried, Err(Error::WouldBlock)),
        "x holds res: {tried:?}"
    );
    assert!(
        during.is_some(),
        "the wait of this handle was still running (in its first poll, its round sent) \
         and nothing else of the handle ran, yet after a clone's try_lock ended waiting() \
         said None, \"no wait of this handle is running\""
    );
}
