//! Reproduces a past break: the retry queue gave up the unlock of a locker whose clock runs slow once the validity had passed on the client's clock, though that locker keeps the entry for the validity of its own clock; the locker answered again before that and kept the released lock's entry, holding the name against everyone there, until it expired.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": "An unlock
//! that fails goes to its locker's retry queue and is retried with backoff
//! until it lands or until the locker must have expired the entry by
//! itself ... So a locker that answers again within the validity is
//! cleaned up, and one that does not has expired the entry." A locker
//! "drops an entry that has not been refreshed for 60 s, measured on the
//! monotonic clock" (its own); docs/safety.md, "How far clocks may drift":
//! "A locker that runs *slower* than the holder only keeps entries longer"
//! (a slow locker is within the drift bound at any rate; the past break of
//! `a_released_lock_leaves_no_entry_behind_a_late_lock_on_a_slow_locker_clock`
//! holds its locker to its own clock at half the rate).
//!
//! The scene (paused time): three lockers, validity 60 s; node 0's clock
//! runs at half (or nine tenths) the rate of the client's. "a" locks "res" on all three. Node 0
//! goes down (every call to it lost), and "a" unlocks: nodes 1 and 2
//! confirm, node 0's unlock goes to the retry queue. Node 0 answers again
//! 70 s (61 s) after the release began: past the 60 s of the client's
//! clock, but within its own validity (it has not expired the entry, and
//! does not for 120 s (66.7 s) after its last refresh). Nothing more is
//! sent to it: the queue gave up at 60 s of the client's clock
//! (src/lock/release.rs `give_up_at`, `after(began, validity)`). Node 0
//! keeps "a"'s entry of the released lock (a "b" gets "res" from nodes 1
//! and 2 only). At the same rate, node 0 back at 56 s is unlocked within
//! 3 s, and back at 61 s has expired the entry (checked while writing
//! this test).
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Relay, Route, TestCluster};
use quorum_lock::{LockerConfig, NetLocker};
use tokio::time::{sleep, Instant};

const SEED: u64 = 36_421;

async fn scene(rate: f64, back: Duration, look: Duration) {
    eprintln!("seed {SEED}, node 0's rate {rate}, back {back:?} after the release began");
    let cluster = TestCluster::with_clocks(3, SEED, LockerConfig::default());
    cluster.set_rate(rate, &[0]).unwrap();
    let down = Arc::new(AtomicBool::new(false));
    let links: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| match i {
            0 => {
                let down = down.clone();
                Arc::new(Relay::new(l, move |_, _| {
                    if down.load(Ordering::SeqCst) {
                        Route::Lost("node 0 is down".into())
                    } else {
                        Route::Forward
                    }
                })) as Arc<dyn NetLocker>
            }
            _ => l,
        })
        .collect();
    let a = common::seeded(links, "a", SEED);
    let start = Instant::now();
    let held = a.rw_mutex(["res"]).unwrap().lock().await.unwrap();
    let uid = held.uid().to_owned();
    let node0 = cluster.lockers()[0].clone();
    assert!(
        node0.snapshot().iter().any(|e| e.uid == uid),
        "node 0 granted"
    );

    down.store(true, Ordering::SeqCst);
    let began = Instant::now();
    held.unlock()
        .await
        .expect("nodes 1 and 2 confirm the unlock");
    assert!(
        node0.snapshot().iter().any(|e| e.uid == uid),
        "node 0 is down: its unlock is queued"
    );

    sleep(back).await;
    down.store(false, Ordering::SeqCst);
    // Node 0 answers again; give the queue time to reach it (still within
    // node 0's own validity).
    sleep(look).await;
    let left: Vec<String> = node0
        .snapshot()
        .into_iter()
        .filter(|e| e.resource == "res")
        .map(|e| e.uid)
        .collect();
    let b = common::seeded(cluster.net_lockers(), "b", SEED + 1);
    let b_write = b.rw_mutex(["res"]).unwrap().try_lock().await.map(|g| {
        let nodes = g.granted_by();
        std::mem::forget(g);
        nodes
    });
    eprintln!(
        "at {:?} ({:?} after the release began; node 0 back {back:?} after it): node 0 keeps \
         {left:?}; b's try_lock gave {b_write:?}",
        start.elapsed(),
        began.elapsed()
    );
    assert!(
        !left.contains(&uid),
        "a's lock was released at {:?} and node 0, down then, answered again {back:?} after \
         it, while it still held the entry (its clock runs at {rate} of a's: the entry lasts \
         {:?} of a's clock after its last refresh); {:?} after the release node 0 still keeps \
         {uid} of the released lock: {left:?}",
        began - start,
        Duration::from_secs_f64(60.0 / rate),
        began.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn an_unlock_retried_for_a_locker_at_half_the_clients_clock_rate_reaches_it_while_it_holds_the_entry(
) {
    scene(0.5, Duration::from_secs(70), Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn an_unlock_retried_for_a_locker_at_nine_tenths_of_the_clients_clock_rate_reaches_it_while_it_holds_the_entry(
) {
    scene(0.9, Duration::from_secs(61), Duration::from_secs(3)).await;
}
