//! Reproduces a past break: a `finish_releases` call counts among the pending at its bound an unlock a call before it saw land, because the release it was taken back from queued it again afterwards, when its own (later) send failed.
//!
//! `Error::ReleasesPending` (rustdoc): `pending` is "Releases still
//! running". docs/guarantees.md, "Any runtime": a `finish_releases`
//! call's sends each count "as landed as soon as it lands, so at the bound
//! only those still on their way are pending"; "what it saw land makes its
//! other copies (queued, or on their way with other tasks or calls ...)
//! moot".
//!
//! The scene, on tokio's paused clocks: guard "a" is dropped on runtime
//! `r1`, not driven for now, so its release is a batch on its way. Call A,
//! `finish_releases(30 s)` on runtime `p`, is polled once: it takes the
//! batch back and sends it, all three unlocks land at once ("a" is freed
//! everywhere) and A returns `Ok`. Locker 0 takes unlocks sent from spawned tasks 60 s
//! late (on their way: they never reach it before their 300 ms timeout).
//! `r1` is then driven for 2 s: its release task's own unlock to locker 0
//! times out and is queued again, and `r1`'s drain task tries it in vain.
//! Then every unlock to locker 0 is late. Call B, `finish_releases(3 s)`
//! on `p`, reports one unlock pending at its bound, though no locker holds
//! "a" and A saw its unlock land before the release queued it again.
#![cfg(feature = "testing")]

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use crate::common::hooked::{Call, Hooked};
use crate::common::{self};
use quorum_lock::{Error, NetLocker, Timeouts};

const SEED: u64 = 7771;

#[test]
fn finish_releases_counts_no_unlock_it_saw_land_that_its_release_queued_again_after() {
    eprintln!("seed {SEED}");
    let nodes = common::nodes(3);
    let slow_tasks = Arc::new(AtomicBool::new(false));
    let slow_all = Arc::new(AtomicBool::new(false));
    let mut lockers: Vec<Arc<dyn NetLocker>> = common::as_lockers(&nodes);
    {
        let (slow_tasks, slow_all) = (slow_tasks.clone(), slow_all.clone());
        lockers[0] = Hooked::new(nodes[0].clone())
            .arriving_late(move |call, _| {
                let from_task = tokio::task::try_id().is_some();
                (call == Call::Unlock
                    && (slow_all.load(Ordering::SeqCst)
                        || (from_task && slow_tasks.load(Ordering::SeqCst))))
                .then_some(Duration::from_secs(60))
            })
            .shared();
    }
    let ds = common::with_timeouts(
        lockers,
        SEED,
        Timeouts {
            unlock: Duration::from_millis(300),
            ..Timeouts::default()
        },
    );

    let r1 = common::paused_runtime();
    let a = r1.block_on(common::try_lock(&ds, "a"));
    let uid = a.uid().to_owned();
    slow_tasks.store(true, Ordering::SeqCst);
    // Dropped on r1, not driven for now: its release task has not run.
    common::drop_on_an_idle_runtime(&r1, a);

    let p = common::paused_runtime();
    let mut call_a = Box::pin(ds.finish_releases(Duration::from_secs(30)));
    let first_a = p.block_on(std::future::poll_fn(|cx| {
        Poll::Ready(call_a.as_mut().poll(cx).is_ready())
    }));
    let after_a = common::holding(&nodes, &uid);
    // r1 is driven for 2 s (paused clock): its release task's send to
    // locker 0 times out and is queued again; its drain task tries it.
    r1.block_on(async { tokio::time::sleep(Duration::from_secs(2)).await });
    slow_all.store(true, Ordering::SeqCst);
    let finished = p.block_on(ds.finish_releases(Duration::from_secs(3)));
    let at_bound = common::holding(&nodes, &uid);
    drop(call_a);
    eprintln!(
        "A ready at first poll: {first_a}; lockers holding a after it {after_a:?}; \
         finish_releases(3 s) B: {finished:?}; lockers holding a at B's bound {at_bound:?}"
    );
    assert_eq!(
        after_a,
        [false, false, false],
        "control: A's copies of the release's unlocks all landed at its first poll"
    );
    assert_eq!(
        at_bound,
        [false, false, false],
        "control: no locker holds a"
    );
    assert!(
        matches!(
            finished,
            Ok(()) | Err(Error::ReleasesPending { pending: 0, .. })
        ),
        "nothing is owed at B's bound (every locker freed a, and A saw each unlock land), yet \
         B returned {finished:?}: the release queued locker 0's unlock again after A's copy \
         landed"
    );
    drop(r1);
}
