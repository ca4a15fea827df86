//! Reproduces a past break: a `finish_releases` call reaching its bound counts among the releases still running an unlock a drain task of its own runtime saw land, while that task still sends another unlock of the same batch.
//!
//! `Error::ReleasesPending` (rustdoc): `pending` is "Releases still
//! running". docs/guarantees.md, "Any runtime": "so at the bound only
//! those still on their way are pending"; an unlock "is in `pending` or in
//! a drain task's batch ... until it lands" (src/lock/unlock_queue.rs).
//!
//! The scene, on one paused runtime: locker 0 refuses unlocks (connection
//! refused) while guards "a" and "b" are dropped, so both unlocks go to its
//! queue, "a"'s first, and a drain task retries them. Locker 0 then takes
//! unlocks again, but "b"'s spends 60 s on its way (the unlock timeout is
//! 5 s). The drain task's batch is "a"'s unlock (its probe, which lands)
//! then "b"'s. Once locker 0 freed "a", `finish_releases(1 s)` is called:
//! at its bound one unlock is owed ("b"'s, still on its way), yet it
//! reports two: "a"'s, landed a second before, stays counted until the
//! drain task's whole batch ends.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::hooked::{connection_refused, Call, Hooked};
use crate::common::{self};
use quorum_lock::{Error, NetLocker, Timeouts};

const SEED: u64 = 7811;

#[test]
fn finish_releases_counts_no_unlock_a_drain_task_saw_land_among_the_pending_at_its_bound() {
    eprintln!("seed {SEED}");
    let nodes = common::nodes(3);
    let down = Arc::new(AtomicBool::new(false));
    let slow_uid: Arc<Mutex<Option<String>>> = Arc::default();
    let mut lockers: Vec<Arc<dyn NetLocker>> = common::as_lockers(&nodes);
    {
        let (down, slow_uid) = (down.clone(), slow_uid.clone());
        lockers[0] = Hooked::new(nodes[0].clone())
            .refusing(move |call, _| {
                (call == Call::Unlock && down.load(Ordering::SeqCst)).then(connection_refused)
            })
            .arriving_late(move |call, args| {
                let slow = slow_uid.lock().unwrap();
                (call == Call::Unlock && slow.as_deref() == Some(&*args.uid))
                    .then_some(Duration::from_secs(60))
            })
            .shared();
    }
    let ds = common::with_timeouts(
        lockers,
        SEED,
        Timeouts {
            unlock: Duration::from_secs(5),
            ..Timeouts::default()
        },
    );

    let p = common::paused_runtime();
    let (freed_a, finished, at_bound) = p.block_on(async {
        let a = common::try_lock(&ds, "a").await;
        let b = common::try_lock(&ds, "b").await;
        let (ua, ub) = (a.uid().to_owned(), b.uid().to_owned());
        down.store(true, Ordering::SeqCst);
        drop(a);
        // "a"'s release gives up its inline retries and queues its unlock.
        tokio::time::sleep(Duration::from_secs(6)).await;
        drop(b);
        tokio::time::sleep(Duration::from_secs(6)).await;
        *slow_uid.lock().unwrap() = Some(ub.clone());
        down.store(false, Ordering::SeqCst);
        // Until the drain task's probe ("a"'s unlock) lands (bounded: 60 s).
        let freed_a = tokio::time::timeout(Duration::from_secs(60), async {
            while common::holds(&nodes[0], &ua) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await
        .is_ok();
        let finished = ds.finish_releases(Duration::from_secs(1)).await;
        let at_bound = (common::holding(&nodes, &ua), common::holding(&nodes, &ub));
        (freed_a, finished, at_bound)
    });
    eprintln!(
        "locker 0 freed a: {freed_a}; finish_releases(1 s): {finished:?}; holding (a, b) at its \
         bound: {at_bound:?}"
    );
    assert!(
        freed_a,
        "control: the drain task's unlock of a landed on locker 0"
    );
    assert_eq!(
        at_bound,
        (vec![false, false, false], vec![true, false, false]),
        "control: at the bound only locker 0 holds b, and no locker holds a"
    );
    let Err(Error::ReleasesPending { pending, .. }) = finished else {
        panic!(
            "control: b's unlock to locker 0 is still on its way at the bound, got {finished:?}"
        );
    };
    assert_eq!(
        pending, 1,
        "one unlock (b's, to locker 0) is still owed at the bound; the call counts too a's, \
         which the drain task saw land a second before"
    );
}
