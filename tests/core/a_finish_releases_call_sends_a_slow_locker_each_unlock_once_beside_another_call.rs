//! Reproduces a past break: a `finish_releases` call sends a slow locker an unlock it already sent it again, because another call merged it into one batch with an unlock the first call had not taken yet, and a batch is taken back whole.
//!
//! docs/guarantees.md, "Any runtime": `finish_releases` "takes them back
//! and sends them itself, where it is driven, once per call for each
//! unlock (so that several calls, each on a runtime of its own, neither
//! take an unlock from each other at every look nor send a slow locker the
//! same unlock again and again)".
//!
//! The scene, on tokio's paused clock: locker 0 takes every unlock but
//! replies 60 s late (the unlock timeout is 300 ms). Guard "a" is dropped
//! on runtime `r1`, no longer driven: its release is a batch on its way.
//! Call A takes it back at 0 ms and sends it itself. At 100 ms guard "b"
//! is dropped on runtime `r2`, no longer driven either, and call B takes
//! back both A's batch (a's unlock, which B has not taken yet) and b's,
//! and sends them as one batch. At 300 ms A's send to locker 0 times out,
//! and A looks again: B's batch holds b's unlock, which A has not taken,
//! so A takes the whole batch back and sends locker 0 a's unlock a second
//! time.
#![cfg(feature = "testing")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::hooked::{Call, Hooked, Late};
use crate::common::{self};
use quorum_lock::{NetLocker, Timeouts};

const SEED: u64 = 7301;

#[test]
fn a_finish_releases_call_sends_a_slow_locker_each_unlock_once_beside_another_call() {
    eprintln!("seed {SEED}");
    let nodes = common::nodes(3);
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let slow = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut lockers: Vec<Arc<dyn NetLocker>> = common::as_lockers(&nodes);
    {
        let seen = seen.clone();
        let slow = slow.clone();
        let counted = seen.clone();
        lockers[0] = Hooked::new(nodes[0].clone())
            .refusing(move |call, args| {
                if call == Call::Unlock {
                    counted.lock().unwrap().push(args.uid.to_string());
                }
                None
            })
            .unlocks_late_while(slow, Late::Replying, Duration::from_secs(60))
            .shared();
        drop(seen);
    }
    let ds = common::with_timeouts(
        lockers,
        SEED,
        Timeouts {
            unlock: Duration::from_millis(300),
            ..Timeouts::default()
        },
    );

    let r1 = common::runtime();
    let r2 = common::runtime();
    let a = r1.block_on(common::try_lock(&ds, "a"));
    let b = r2.block_on(common::try_lock(&ds, "b"));
    let (uid_a, uid_b) = (a.uid().to_owned(), b.uid().to_owned());
    slow.store(true, std::sync::atomic::Ordering::SeqCst);
    // Dropped on r1, which is not driven again: its release task never runs.
    common::drop_on_an_idle_runtime(&r1, a);

    let paused = common::paused_runtime();
    let sent_a =
        |seen: &Mutex<Vec<String>>| seen.lock().unwrap().iter().filter(|u| **u == uid_a).count();
    let (at_start, after_b, at_350, first, second) = paused.block_on(async {
        let ds_a = ds.clone();
        let call_a =
            tokio::spawn(async move { ds_a.finish_releases(Duration::from_secs(2)).await });
        tokio::time::sleep(Duration::from_millis(10)).await;
        let at_start = sent_a(&seen);
        tokio::time::sleep(Duration::from_millis(90)).await;
        {
            // Dropped on r2, not driven again either.
            let _on_r2 = r2.enter();
            drop(b);
        }
        let ds_b = ds.clone();
        let call_b =
            tokio::spawn(async move { ds_b.finish_releases(Duration::from_secs(2)).await });
        tokio::time::sleep(Duration::from_millis(10)).await;
        let after_b = sent_a(&seen);
        tokio::time::sleep(Duration::from_millis(240)).await;
        let at_350 = sent_a(&seen);
        let first = call_a.await.expect("no panic");
        let second = call_b.await.expect("no panic");
        (at_start, after_b, at_350, first, second)
    });
    let all = seen.lock().unwrap().clone();
    eprintln!(
        "unlocks of a's uid at locker 0: {at_start} by 10 ms, {after_b} by 110 ms, {at_350} by \
         350 ms; calls returned {first:?} and {second:?}; every unlock locker 0 was sent: {} of \
         a, {} of b",
        all.iter().filter(|u| **u == uid_a).count(),
        all.iter().filter(|u| **u == uid_b).count(),
    );
    assert_eq!(at_start, 1, "control: call A sent a's unlock at once");
    assert_eq!(
        after_b, 2,
        "control: call B sent a's unlock once more, at once"
    );
    assert!(
        at_350 <= 2,
        "two finish_releases calls, each sending each unlock once, sent locker 0 (slow to \
         reply) a's unlock {at_350} times by 350 ms: call A, whose own send timed out at 300 ms, \
         took back B's batch (a's unlock beside b's, which A had not taken) and sent a's unlock \
         again"
    );
    drop((r1, r2));
}
