//! Reproduces a past break: a `finish_releases` call sends a locker an unlock it already saw land a second time, because the release it took the unlock back from queued it again afterwards (its own later send failed) and the call took that copy back too.
//!
//! docs/guarantees.md, "Any runtime": `finish_releases` "takes them back
//! and sends them itself, where it is driven, once per call for each
//! unlock"; "What it saw land makes its other copies (queued, or on their
//! way with other tasks or calls ...) moot".
//!
//! The scene, on tokio's paused clocks: locker 0 takes unlocks sent from
//! spawned tasks (releases, drain tasks) 60 s late, on their way (they
//! never reach it before their 300 ms timeout); locker 2 refuses every
//! unlock (connection refused), so that call A below stays running. Guard
//! "a" is dropped on runtime `r1`, not driven for now: its release is a
//! batch on its way. A, `finish_releases(5 s)` on runtime `p`, is polled
//! once: it takes the batch back and sends it; its unlock to locker 0
//! lands. Then `r1` is driven until its release task's own send to locker
//! 0 timed out and was queued again, and `r1`'s drain task is sending it:
//! `r1` stops then. A is driven to its end: it takes that batch back and sends
//! locker 0 the unlock it saw land a second time.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::hooked::{Call, Hooked};
use crate::common::release_on_its_way::{poll_once, UnlockSenders};
use crate::common::{self};
use quorum_lock::{Error, NetLocker, Timeouts};

const SEED: u64 = 7774;

#[test]
fn a_finish_releases_call_sends_an_unlock_it_saw_land_once_though_its_release_queued_it_again_after(
) {
    eprintln!("seed {SEED}");
    let nodes = common::nodes(3);
    let slow = Arc::new(AtomicBool::new(false));
    let senders = UnlockSenders::default();
    let mut lockers: Vec<Arc<dyn NetLocker>> = common::as_lockers(&nodes);
    {
        let (slow, refusing, recorded) = (slow.clone(), slow.clone(), senders.clone());
        lockers[0] = Hooked::new(nodes[0].clone())
            .arriving_late(move |call, args| {
                if call != Call::Unlock {
                    return None;
                }
                let from_task = recorded.record(&args.uid);
                (from_task && slow.load(Ordering::SeqCst)).then_some(Duration::from_secs(60))
            })
            .shared();
        lockers[2] = Hooked::new(nodes[2].clone())
            .refusing(move |call, _| {
                (call == Call::Unlock && refusing.load(Ordering::SeqCst)).then(|| {
                    Error::LockerUnavailable {
                        endpoint: "node-2".into(),
                        reason: "connection refused".into(),
                    }
                })
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
    slow.store(true, Ordering::SeqCst);
    // Dropped on r1, not driven for now: its release task has not run.
    common::drop_on_an_idle_runtime(&r1, a);
    let p = common::paused_runtime();

    let mut call_a = Box::pin(ds.finish_releases(Duration::from_secs(5)));
    let first_a = p.block_on(poll_once(&mut call_a));
    let at_first_poll = senders.by_call_on(&uid, &p);
    let after_a = common::holding(&nodes, &uid);
    // r1 is driven (paused clock) until its release task's send to locker
    // 0 timed out and was queued again, and its drain task sent it
    // (bounded: 10 s), and stops as its drain task sends it.
    let (_, on_r1) = senders.drive_until_sent(&r1, &uid, 2);
    let finished = p.block_on(call_a);
    let sends_a = senders.by_call_on(&uid, &p);
    eprintln!(
        "A ready at first poll: {first_a}, its sends to locker 0 then {at_first_poll}; holding a \
         after it {after_a:?}; r1 sent locker 0 the unlock {on_r1} times; A returned \
         {finished:?}; A sent locker 0 the unlock {sends_a} times in all; every unlock locker 0 \
         was sent: {:?}",
        senders.all()
    );
    assert!(
        !first_a && at_first_poll == 1,
        "control: A took the release back and sent locker 0 the unlock at its first poll"
    );
    assert_eq!(
        after_a,
        [false, false, true],
        "control: A's unlock to locker 0 landed at its first poll"
    );
    assert!(
        on_r1 >= 1,
        "control: r1's release task sent locker 0 the unlock (before the fix, its drain task \
         sent it again, queued afresh)"
    );
    assert_eq!(
        sends_a, 1,
        "one finish_releases call sends each unlock once; A sent locker 0 the unlock it saw \
         land {sends_a} times: it took it back again from r1's drain task, to which its release \
         had queued it afresh"
    );
    drop(r1);
}
