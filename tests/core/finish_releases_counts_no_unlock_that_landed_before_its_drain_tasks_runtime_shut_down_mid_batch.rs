//! Reproduces a past break: a drain task whose runtime shuts down mid-batch puts back in the queue the unlocks of its batch that landed already, and `finish_releases` then counts them among the releases still running.
//!
//! `Error::ReleasesPending` (rustdoc): `pending` is "Releases still
//! running". docs/guarantees.md, "Any runtime": "so at the bound only
//! those still on their way are pending"; `QueueState::owed`: one unlock
//! per uid, "one that lands frees the entry for all of them".
//!
//! The scene: locker 0 refuses unlocks while guards "a", "b" and "c" are
//! dropped on runtime X (paused), so their unlocks go to its queue, and
//! X's drain task retries them. Locker 0 takes unlocks again, but "b"'s
//! and "c"'s arrive 60 s late (the unlock timeout is 5 s). X's drain
//! task's probe ("a") lands, and while it sends "b" and "c" locker 0
//! refuses unlocks again and X is dropped. `finish_releases(1 s)` on
//! runtime P: two unlocks are owed at its bound ("b"'s and "c"'s: no
//! locker holds "a"), yet it reports three.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::hooked::{connection_refused, Call, Hooked};
use crate::common::{self};
use quorum_lock::{Error, NetLocker, Timeouts};

const SEED: u64 = 7912;

#[test]
fn finish_releases_counts_no_unlock_that_landed_before_its_drain_tasks_runtime_shut_down_mid_batch()
{
    eprintln!("seed {SEED}");
    let nodes = common::nodes(3);
    let down = Arc::new(AtomicBool::new(false));
    // ("b"'s uid, "c"'s uid) once armed.
    let slow: Arc<Mutex<Option<(String, String)>>> = Arc::default();
    let mut lockers: Vec<Arc<dyn NetLocker>> = common::as_lockers(&nodes);
    {
        let (down, slow) = (down.clone(), slow.clone());
        lockers[0] = Hooked::new(nodes[0].clone())
            .refusing(move |call, _| {
                (call == Call::Unlock && down.load(Ordering::SeqCst)).then(connection_refused)
            })
            .arriving_late(move |call, args| {
                let slow = slow.lock().unwrap();
                let (ub, uc) = slow.as_ref()?;
                (call == Call::Unlock && (*args.uid == **ub || *args.uid == **uc))
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
    // Locker 0 refuses unlocks again (so that what the queue holds stays
    // there), and X shuts down with its drain task sending "b" and "c".
    down.store(true, Ordering::SeqCst);
    drop(x);
    let p = common::paused_runtime();
    let finished = p.block_on(ds.finish_releases(Duration::from_secs(1)));
    let at_bound = (
        common::holding(&nodes, &ua),
        common::holding(&nodes, &ub),
        common::holding(&nodes, &uc),
    );
    eprintln!(
        "freed a: {freed_a}; finish_releases(1 s): {finished:?}; holding (a, b, c) at its \
         bound: {at_bound:?}"
    );
    assert!(freed_a, "control: X's drain task's unlock of a landed");
    assert_eq!(
        at_bound,
        (
            vec![false, false, false],
            vec![true, false, false],
            vec![true, false, false]
        ),
        "control: at the bound locker 0 holds b and c, and no locker holds a"
    );
    let Err(Error::ReleasesPending { pending, .. }) = finished else {
        panic!("control: b's and c's unlocks to locker 0 are still owed at the bound, got {finished:?}");
    };
    assert_eq!(
        pending, 2,
        "two unlocks (b's and c's, to locker 0) are still owed at the bound; the call counts too \
         a's, which X's drain task saw land before its runtime shut down"
    );
}
