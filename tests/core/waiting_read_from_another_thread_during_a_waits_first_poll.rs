//! Reproduces a past break: `waiting()` read from another thread while a wait's first poll was still running (its round's calls sent, one of them slow to leave) said `None`, "no wait of this handle is running", and a `try_lock` whose one round was running said `None` too.
//!
//! `DRWMutex::waiting` (src/lock/mutex.rs): "Why the latest wait of this
//! handle (or a clone of it) is not granted yet ... `None` when no wait of
//! this handle is running. Waits (`lock`, `read` and their `_timeout`
//! forms) report here, and so do one-round `try_` calls while their round
//! runs; when several run at once through the same handle, the one that
//! began last among those still running reports (one that has not started
//! its first round yet knows nothing, so the one before it does)."
//!
//! The scene: three lockers; "x" holds "res". "w" waits for it (or makes
//! one `try_lock` round) on a runtime of its own thread. Its round's call
//! to w's third locker is slow to leave: that locker's link (a `Relay`
//! whose route is decided inside the call) takes its time before it
//! forwards, inside the wait's first poll, after the calls to the other
//! two went out. The test's thread reads `waiting()` then: `None`. A
//! moment later (the first poll returned `Pending`) the same read says
//! `HeldElsewhere` ("3 of 3 lockers have it taken by another owner").
//! A `Holder::lock_timeout` behind a clone's wait, which gives up with
//! `mutex.waiting()`'s error, reads the same `None` there.
//!
//! Suspected cause: the wait's watch is posted on the handle's board only
//! once its acquire returned `Pending` (src/lock/wait_watch.rs,
//! `BoardWatch`: "one granted or refused in its first poll ... ends before
//! anyone else could ask the board"), which holds on one thread only.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common;
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, NetLocker, WaitReason};

#[derive(Clone, Copy, Debug)]
enum Form {
    Wait,
    TryLock,
}

fn scene(seed: u64, form: Form) {
    eprintln!("seed {seed}, form {form:?}");
    let cluster = TestCluster::new(3, seed);
    let slow = Arc::new(AtomicBool::new(false));
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let entered_tx = Mutex::new(entered_tx);
    let go_rx = Arc::new(Mutex::new(go_rx));
    let mut nodes = cluster.net_lockers();
    // The held-up link last, so that the calls to the other two lockers
    // went out when it holds up the first poll.
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
                    .map_err(|_| quorum_lock::Error::Timeout)
                    .and_then(|r| r),
                Form::TryLock => waiter.try_lock().await,
            };
            r.map(std::mem::forget).is_ok()
        })
    });
    entered_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the first poll reached the held-up call");
    let during = mutex.waiting();
    go_tx.send(()).expect("the call goes on");
    std::thread::sleep(Duration::from_millis(100));
    let after = mutex.waiting();
    let granted = thread.join().expect("the waiting thread ends");
    drop(held);
    eprintln!(
        "during the first poll: {:?}; 100 ms later: {:?}; granted {granted}",
        during.as_ref().map(|s| (s.reason(), s.to_string())),
        after.as_ref().map(|s| (s.reason(), s.to_string()))
    );
    assert!(!granted, "x held the lock throughout");
    if let Form::Wait = form {
        assert_eq!(
            after.as_ref().map(|s| s.reason()),
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
    scene(36_411, Form::Wait);
}

#[test]
fn waiting_read_from_another_thread_during_a_try_locks_round_sees_the_round() {
    scene(36_412, Form::TryLock);
}
