//! Reproduces a past break: a `finish_releases` call reaching its bound counts among the releases still running an unlock it took back from a drain task of another runtime, which that task then saw land, while that task still sends another unlock of the same batch.
//!
//! `Error::ReleasesPending` (rustdoc): `pending` is "Releases still
//! running". docs/guarantees.md, "Any runtime": "so at the bound only
//! those still on their way are pending"; `QueueState::owed`: one unlock
//! per uid, "one that lands frees the entry for all of them".
//!
//! The scene: locker 0 refuses unlocks while guards "a", "b" and "c" are
//! dropped on runtime X (paused), so their unlocks go to its queue, and
//! X's drain task retries them. Locker 0 takes unlocks again: "b"'s first
//! unlock then arrives 3 s late (and lands), every later one 60 s late (the
//! unlock timeout is 5 s), "c"'s always 60 s late. X's drain task's probe
//! ("a") lands, and X stops being driven while it sends "b" and "c". A
//! `finish_releases(1 s)` call on runtime P takes back "b" and "c" from
//! X's batch and sends them (late). X is driven 4 s more: its "b" lands
//! (locker 0 frees it). Then the call runs to its bound: one unlock is owed
//! ("c"'s), yet it reports two, its copy of "b"'s among them.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::hooked::{connection_refused, Call, Hooked};
use crate::common::release_on_its_way::poll_once;
use crate::common::{self};
use quorum_lock::{Error, NetLocker, Timeouts};

const SEED: u64 = 7911;

#[test]
fn finish_releases_counts_no_unlock_a_drain_task_of_another_runtime_saw_land_among_the_pending_at_its_bound(
) {
    eprintln!("seed {SEED}");
    let nodes = common::nodes(3);
    let down = Arc::new(AtomicBool::new(false));
    // ("b"'s uid, "c"'s uid) once armed.
    let slow: Arc<Mutex<Option<(String, String)>>> = Arc::default();
    let b_sends = Arc::new(AtomicUsize::new(0));
    let mut lockers: Vec<Arc<dyn NetLocker>> = common::as_lockers(&nodes);
    {
        let (down, slow, b_sends) = (down.clone(), slow.clone(), b_sends.clone());
        lockers[0] = Hooked::new(nodes[0].clone())
            .refusing(move |call, _| {
                (call == Call::Unlock && down.load(Ordering::SeqCst)).then(connection_refused)
            })
            .arriving_late(move |call, args| {
                let slow = slow.lock().unwrap();
                let (ub, uc) = slow.as_ref()?;
                if call != Call::Unlock {
                    return None;
                }
                if *args.uid == **ub {
                    let nth = b_sends.fetch_add(1, Ordering::SeqCst);
                    Some(Duration::from_secs(if nth == 0 { 3 } else { 60 }))
                } else if *args.uid == **uc {
                    Some(Duration::from_secs(60))
                } else {
                    None
                }
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

    let x = common::paused_runtime();
    let (ua, ub, uc, freed_a) = x.block_on(async {
        let a = common::try_lock(&ds, "a").await;
        let b = common::try_lock(&ds, "b").await;
        let c = common::try_lock(&ds, "c").await;
        let (ua, ub, uc) = (a.uid().to_owned(), b.uid().to_owned(), c.uid().to_owned());
        down.store(true, Ordering::SeqCst);
        drop(a);
        // "a"'s release gives up its inline retries and queues its unlock.
        tokio::time::sleep(Duration::from_secs(6)).await;
        drop(b);
        drop(c);
        tokio::time::sleep(Duration::from_secs(6)).await;
        *slow.lock().unwrap() = Some((ub.clone(), uc.clone()));
        down.store(false, Ordering::SeqCst);
        // Until the drain task's probe ("a"'s unlock) lands (bounded: 60 s).
        let freed_a = tokio::time::timeout(Duration::from_secs(60), async {
            while common::holds(&nodes[0], &ua) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await
        .is_ok();
        (ua, ub, uc, freed_a)
    });
    let p = common::paused_runtime();
    let mut call = Box::pin(ds.finish_releases(Duration::from_secs(1)));
    let done_at_once = p.block_on(poll_once(&mut call));
    // X's drain task's "b" arrives and lands; its "c" is still on its way.
    x.block_on(async { tokio::time::sleep(Duration::from_secs(4)).await });
    let b_freed_before_bound = !common::holds(&nodes[0], &ub);
    let finished = p.block_on(call);
    let at_bound = (
        common::holding(&nodes, &ua),
        common::holding(&nodes, &ub),
        common::holding(&nodes, &uc),
    );
    eprintln!(
        "freed a: {freed_a}; done at once: {done_at_once}; b freed before the bound: \
         {b_freed_before_bound}; b sends: {}; finish_releases(1 s): {finished:?}; holding \
         (a, b, c) at its bound: {at_bound:?}",
        b_sends.load(Ordering::SeqCst)
    );
    assert!(freed_a, "control: X's drain task's unlock of a landed");
    assert!(!done_at_once, "control: the call sends b and c late");
    assert!(
        b_freed_before_bound,
        "control: X's drain task's unlock of b landed"
    );
    assert_eq!(
        at_bound,
        (
            vec![false, false, false],
            vec![false, false, false],
            vec![true, false, false]
        ),
        "control: at the bound only locker 0 holds c"
    );
    let Err(Error::ReleasesPending { pending, .. }) = finished else {
        panic!(
            "control: c's unlock to locker 0 is still on its way at the bound, got {finished:?}"
        );
    };
    assert_eq!(
        pending, 1,
        "one unlock (c's, to locker 0) is still owed at the bound; the call counts too its copy \
         of b's, which X's drain task saw land"
    );
}
