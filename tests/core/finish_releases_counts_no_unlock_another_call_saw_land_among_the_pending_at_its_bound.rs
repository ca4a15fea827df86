//! Reproduces a past break: a `finish_releases` call reaching its bound counts among the releases still running the unlocks another call, still waiting on a slow send, saw land seconds before.
//!
//! `Error::ReleasesPending` (rustdoc): `pending` is "Releases still
//! running". docs/guarantees.md, "Any runtime": a `finish_releases`
//! call's sends each count "as landed as soon as it lands, so at the bound
//! only those still on their way are pending"; "what it saw land makes its
//! other copies (queued, or on their way with other tasks or calls ...)
//! moot".
//!
//! The scene, on tokio's paused clock: guard "a" is dropped on runtime
//! `r1`, which is not driven again, so its release is a batch on its way.
//! Locker 0 takes unlocks 60 s late (on their way to it). Call A,
//! `finish_releases(30 s)`, is polled once: it takes the batch back and
//! sends it; the unlocks to lockers 1 and 2 land at once, locker 0's is on
//! its way. A is then not polled again (nor dropped). Lockers 1 and 2 now
//! take unlocks 60 s late too. Call B, `finish_releases(3 s)`, takes
//! copies of A's unlocks and sends them; none lands by its bound. One
//! unlock is owed then (locker 0's: lockers 1 and 2 freed "a" at 0 s), yet
//! B reports three: what A saw land is known to nobody until A's sends all
//! end.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::hooked::{Hooked, Late};
use crate::common::release_on_its_way::poll_once;
use crate::common::{self};
use quorum_lock::{Error, NetLocker};

const SEED: u64 = 7602;

#[test]
fn finish_releases_counts_no_unlock_another_call_saw_land_among_the_pending_at_its_bound() {
    eprintln!("seed {SEED}");
    let nodes = common::nodes(3);
    let slow_first = Arc::new(AtomicBool::new(false));
    let slow_rest = Arc::new(AtomicBool::new(false));
    let mut lockers: Vec<Arc<dyn NetLocker>> = common::as_lockers(&nodes);
    for (i, slow) in [(0, &slow_first), (1, &slow_rest), (2, &slow_rest)] {
        lockers[i] = Hooked::new(nodes[i].clone())
            .unlocks_late_while(slow.clone(), Late::Arriving, Duration::from_secs(60))
            .shared();
    }
    let ds = common::client(lockers, SEED);

    let r1 = common::runtime();
    let a = r1.block_on(common::try_lock(&ds, "a"));
    let uid = a.uid().to_owned();
    slow_first.store(true, Ordering::SeqCst);
    // Dropped on r1, which is not driven again: its release task never runs.
    common::drop_on_an_idle_runtime(&r1, a);

    let paused = common::paused_runtime();
    let (first_a, after_a, finished, at_bound) = paused.block_on(async {
        let mut call_a = Box::pin(ds.finish_releases(Duration::from_secs(30)));
        let first_a = poll_once(&mut call_a).await;
        let after_a = common::holding(&nodes, &uid);
        // A is not polled again (nor dropped); lockers 1 and 2 turn slow.
        slow_rest.store(true, Ordering::SeqCst);
        let finished = ds.finish_releases(Duration::from_secs(3)).await;
        let at_bound = common::holding(&nodes, &uid);
        drop(call_a);
        (first_a, after_a, finished, at_bound)
    });
    eprintln!(
        "A ready at first poll: {first_a}; lockers holding a after it {after_a:?}; \
         finish_releases(3 s) B: {finished:?}; lockers holding a at B's bound {at_bound:?}"
    );
    assert!(!first_a, "control: A was sending to the slow locker 0");
    assert_eq!(
        after_a,
        [true, false, false],
        "control: A's unlocks to lockers 1 and 2 landed at its first poll"
    );
    assert_eq!(
        at_bound,
        [true, false, false],
        "control: only locker 0 holds a at B's bound"
    );
    let Err(Error::ReleasesPending { pending, .. }) = finished else {
        panic!("control: locker 0's unlock is still on its way at B's bound, got {finished:?}");
    };
    assert_eq!(
        pending, 1,
        "one unlock (locker 0's) is still owed at B's bound; B counts too the unlocks to \
         lockers 1 and 2 that A saw land at 0 s"
    );
    drop(r1);
}
