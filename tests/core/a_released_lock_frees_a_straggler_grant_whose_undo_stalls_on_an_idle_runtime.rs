//! Reproduces a past break: a straggler grant that settled after the release on the acquiring runtime, which then went idle with the straggler's own unlock on its way, was left on a locker that answers: the release's watch saw the call settle and ended.
//!
//! docs/guarantees.md, "Any runtime": "an acquiring runtime that is idle
//! or gone holds nothing up", and "a release watches every locker with a
//! lock or wait call on its way ... until each such call settles (it then
//! undoes its own grant), and once it must have ended ... the release's
//! side sends that locker the unlock itself"; "No leaks": a guard's
//! release "never leaves an entry behind on a reachable locker".
//!
//! What happens instead: three lockers; locker 2 applies the lock at once
//! but its reply takes 300 ms. `try_lock` on the current-thread runtime X
//! wins with lockers 0 and 1; the straggler to locker 2 stays on X. The
//! guard is unlocked on a plain thread (on the `Dsync`'s own runtime):
//! lockers 0 and 1 confirm, and a watch waits for locker 2's call. X is
//! driven 400 ms more: the reply arrives, the call records its grant, sees
//! the release and starts its own unlock, which is on its way (a link
//! that delivers it a second late, from X) when X goes idle. The watch saw
//! the call settle and ended; nothing else sends the unlock, and locker 2,
//! answering all along, keeps the entry until it expires (driven, X would
//! have freed it a second later).
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::executor::block_on;
use quorum_lock::testing::{CallKind, Route, TestCluster};
use quorum_lock::Dsync;

use crate::common::holding;

const SEED: u64 = 36_346;

#[test]
fn a_released_lock_frees_a_straggler_grant_whose_undo_stalls_on_an_idle_runtime() {
    let cluster = TestCluster::new(3, SEED);
    // Locker 2: lock replies 300 ms late; its first unlock is delivered a
    // second late, from the caller's runtime (on the wire while it runs).
    let delayed = Arc::new(AtomicBool::new(false));
    let lockers = {
        let delayed = delayed.clone();
        cluster.relayed_lockers(move |i, kind, _| match (i, kind) {
            (2, CallKind::Lock) => Route::SlowReply(Duration::from_millis(300)),
            (2, CallKind::Unlock) if !delayed.swap(true, Ordering::SeqCst) => {
                Route::Late(Duration::from_secs(1))
            }
            _ => Route::Forward,
        })
    };
    let ds = Dsync::builder(lockers)
        .owner("a")
        .rng_seed(SEED)
        .build()
        .expect("valid coordinator");
    let acquiring = crate::common::runtime();
    let guard = acquiring.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(5),
            ds.rw_mutex(["x"]).unwrap().try_lock(),
        )
        .await
        .expect("in time")
        .expect("lockers 0 and 1 grant")
    });
    let uid = guard.uid().to_owned();
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [true, true, true],
        "locker 2 applied the grant; its reply is on its way"
    );
    let unlocked = block_on(guard.unlock());
    assert!(unlocked.is_ok(), "lockers 0 and 1 confirm: {unlocked:?}");
    // X runs 400 ms more: the straggler's reply arrives and it starts its
    // own unlock; then X is idle (kept, not driven, not gone).
    acquiring.block_on(async { tokio::time::sleep(Duration::from_millis(400)).await });
    let start = Instant::now();
    let left = loop {
        let left = holding(cluster.lockers(), &uid);
        if !left.iter().any(|h| *h) || start.elapsed() >= Duration::from_millis(2500) {
            break left;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!("after the release, with X idle: lockers holding the uid {left:?}");
    assert!(
        !left.iter().any(|h| *h),
        "the lock was released (confirmed) and every locker answers, yet 2.5 s later locker 2 \
         still holds the straggler's grant: its undo stalled on the idle acquiring runtime and \
         the release's watch had ended: {left:?}"
    );
    drop(acquiring);
}
