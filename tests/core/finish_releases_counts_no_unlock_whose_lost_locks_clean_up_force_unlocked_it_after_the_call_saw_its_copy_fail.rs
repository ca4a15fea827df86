//! Reproduces a past break: `finish_releases` counts among the pending at its bound an unlock whose lost lock's clean-up force-unlocked the entry after an earlier call took a copy back and saw it fail.
//!
//! `Error::ReleasesPending` (rustdoc): `pending` is "Releases still
//! running". docs/guarantees.md, "Any runtime": "A copy the call took back
//! and saw fail is moot, as its own landings make the others, when the
//! release itself (or a drain task) lands a copy of the same unlock".
//!
//! The scene, on tokio's paused clocks: guard "a" is taken on runtime
//! `r1`; an admin forces "a" open on lockers 1 and 2, so the next refresh
//! declares it lost. The guard is dropped on `r1`, not driven for now:
//! the lost lock's clean-up (force-unlocks) is recorded as a batch on its
//! way. Locker 0 refuses every plain unlock sent from runtime `p` (it
//! takes force-unlocks, and anything from `r1`). Call A,
//! `finish_releases(1 s)` on `p`, takes the batch back and sends it:
//! locker 0 refuses its copy, which goes back to the queue. Then `r1` is
//! driven: the clean-up force-unlocks "a" on locker 0, which holds it no
//! more. Call B, `finish_releases(1 s)` on `p`, still reports that unlock
//! pending at its bound (its drain task keeps sending it), though no
//! locker holds "a".
#![cfg(feature = "testing")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::hooked::{connection_refused, Call, Hooked};
use crate::common::{self};
use quorum_lock::{Error, LockArgs, NetLocker};

const SEED: u64 = 8111;

#[test]
fn finish_releases_counts_no_unlock_whose_lost_locks_clean_up_force_unlocked_it_after_the_call_saw_its_copy_fail(
) {
    eprintln!("seed {SEED}");
    let nodes = common::nodes(3);
    let refusing_on: Arc<Mutex<Option<tokio::runtime::Id>>> = Arc::default();
    let sent: Arc<Mutex<Vec<(Call, bool)>>> = Arc::default();
    let mut lockers: Vec<Arc<dyn NetLocker>> = common::as_lockers(&nodes);
    {
        let (refusing_on, sent) = (refusing_on.clone(), sent.clone());
        lockers[0] = Hooked::new(nodes[0].clone())
            .refusing(move |call, _| {
                if !matches!(call, Call::Unlock | Call::ForceUnlock) {
                    return None;
                }
                let here = tokio::runtime::Handle::try_current().ok().map(|h| h.id());
                let refused =
                    call == Call::Unlock && here.is_some() && *refusing_on.lock().unwrap() == here;
                sent.lock().unwrap().push((call, refused));
                refused.then(connection_refused)
            })
            .shared();
    }
    let ds = common::client(lockers, SEED);

    let r1 = common::paused_runtime();
    let (guard, lost) = r1.block_on(async {
        let guard = common::try_lock(&ds, "a").await;
        let force = LockArgs {
            uid: "".into(),
            resources: vec!["a".to_string()].into(),
            owner: "admin".into(),
            source: "test".into(),
            quorum: 0,
        };
        for node in &nodes[1..] {
            assert!(NetLocker::force_unlock(&**node, &force).await.unwrap());
        }
        let mut waited = 0;
        while !guard.is_lost() && waited < 600 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            waited += 1;
        }
        let lost = guard.is_lost();
        (guard, lost)
    });
    let uid = guard.uid().to_owned();
    assert!(
        lost,
        "control: lockers 1 and 2 say not held: the lock is lost"
    );
    // Dropped on r1, not driven for now: its clean-up task has not run.
    common::drop_on_an_idle_runtime(&r1, guard);
    let before_a = common::holding(&nodes, &uid);

    let p = common::paused_runtime();
    *refusing_on.lock().unwrap() = Some(p.handle().id());
    let a = p.block_on(ds.finish_releases(Duration::from_secs(1)));
    let after_a = common::holding(&nodes, &uid);
    // r1 is driven for 1 s: the clean-up force-unlocks "a" on locker 0.
    r1.block_on(async { tokio::time::sleep(Duration::from_secs(1)).await });
    let after_r1 = common::holding(&nodes, &uid);
    let b = p.block_on(ds.finish_releases(Duration::from_secs(1)));
    let at_bound = common::holding(&nodes, &uid);
    eprintln!(
        "holding a before A {before_a:?}; A gave {a:?}, holding after it {after_a:?}; after r1 \
         was driven {after_r1:?}; B gave {b:?}, holding at its bound {at_bound:?}; locker 0 \
         was sent (call, refused): {:?}",
        sent.lock().unwrap()
    );
    assert_eq!(
        before_a,
        [true, false, false],
        "control: locker 0 holds the lost lock's entry"
    );
    assert_eq!(
        after_a,
        [true, false, false],
        "control: locker 0 refused A's copy of the unlock"
    );
    assert_eq!(
        after_r1,
        [false, false, false],
        "control: the clean-up freed locker 0"
    );
    assert!(
        matches!(b, Ok(()) | Err(Error::ReleasesPending { pending: 0, .. })),
        "nothing is owed at B's bound (the lost lock's clean-up freed locker 0, the copy A saw \
         fail is moot), yet B returned {b:?}"
    );
    drop(r1);
}
