//! Reproduces a past break: with background retries off, an unlock found late whose only send a `finish_releases` call cut short at its bound is marked tried and given up, never reaching its locker, and the call returns `Ok`.
//!
//! docs/guarantees.md, "Any runtime": "An unlock no call has tried yet is
//! tried once, however late it is found, whatever `Timeouts::release_retry`
//! says"; what a `finish_releases` call "took back and did not see land
//! (it failed, the call reached its bound, or the call was dropped) goes
//! back to the queue with a drain task to send it". `Dsync::finish_releases`
//! returns `Ok` only when nothing is owed.
//!
//! The scene, on tokio's paused clocks, with a 300 ms unlock timeout and
//! `Timeouts::release_retry` zero: guard "a" is dropped on runtime `r1`,
//! never driven again, so its release is a batch on its way. Locker 0
//! takes unlocks 60 s late (on their way: dropped with the caller's wait
//! before they land) while `slow` is set. On runtime `r2`, 10 s later, a
//! `finish_releases(50 ms)` finds the batch overdue: its drain tasks take
//! it (never tried yet, so tried once though past its window); lockers 1
//! and 2 are freed, and the send to locker 0 is still on its way at the
//! bound, where `r2` stops being driven. On runtime `p`, 10 s on, call C,
//! `finish_releases(0)`, takes that batch back and starts its send, cut
//! short at once by its bound: the copy goes back to the queue marked as
//! tried, past its window, so C returns `Ok` and the drain task it left
//! drops the unlock as given up. Locker 0 answers at once from then on,
//! yet keeps "a": nothing ever sends it the unlock.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::hooked::Hooked;
use crate::common::{self};
use quorum_lock::{Error, NetLocker, Timeouts};

const SEED: u64 = 8341;

#[test]
fn an_unlock_found_late_with_background_retries_off_is_tried_once_though_a_finish_releases_call_cut_its_send_short(
) {
    eprintln!("seed {SEED}");
    let nodes = common::nodes(3);
    let slow = Arc::new(AtomicBool::new(false));
    let mut lockers: Vec<Arc<dyn NetLocker>> = common::as_lockers(&nodes);
    lockers[0] = Hooked::new(nodes[0].clone())
        .unlocks_late_while(
            slow.clone(),
            common::hooked::Late::Arriving,
            Duration::from_secs(60),
        )
        .shared();
    let ds = common::with_timeouts(
        lockers,
        SEED,
        Timeouts {
            unlock: Duration::from_millis(300),
            release_retry: Duration::ZERO,
            ..Timeouts::default()
        },
    );
    let r1 = common::paused_runtime();
    let guard = r1.block_on(common::try_lock(&ds, "a"));
    let uid = guard.uid().to_owned();
    slow.store(true, Ordering::SeqCst);
    common::drop_on_an_idle_runtime(&r1, guard);

    let r2 = common::paused_runtime();
    let on_r2 = r2.block_on(async {
        tokio::time::sleep(Duration::from_secs(10)).await;
        ds.finish_releases(Duration::from_millis(50)).await
    });
    let after_r2 = common::holding(&nodes, &uid);

    let p = common::paused_runtime();
    let c = p.block_on(async {
        tokio::time::sleep(Duration::from_secs(10)).await;
        ds.finish_releases(Duration::ZERO).await
    });
    let after_c = common::holding(&nodes, &uid);
    // Locker 0 answers at once from now on; p is driven for 5 s.
    slow.store(false, Ordering::SeqCst);
    let later = p.block_on(async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        ds.finish_releases(Duration::from_secs(1)).await
    });
    let at_end = common::holding(&nodes, &uid);
    eprintln!(
        "on r2: {on_r2:?}, holding after {after_r2:?}; C gave {c:?}, holding after {after_c:?}; \
         5 s later: {later:?}, holding {at_end:?}"
    );
    assert!(
        matches!(on_r2, Err(Error::ReleasesPending { pending: 1, .. })),
        "control: r2's drain task's send to locker 0 was on its way at the bound"
    );
    assert_eq!(
        after_r2,
        [true, false, false],
        "control: lockers 1 and 2 were freed"
    );
    assert!(
        !(c.is_ok() && after_c[0]),
        "C returned Ok while locker 0 still holds a, its unlock never delivered"
    );
    assert_eq!(
        at_end,
        [false, false, false],
        "the unlock of a never reached locker 0, though it answers at once and the unlock was \
         never tried to the end (C gave {c:?})"
    );
    drop(r2);
    drop(r1);
}
