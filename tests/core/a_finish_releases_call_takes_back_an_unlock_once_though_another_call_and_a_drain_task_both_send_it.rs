//! Reproduces a past break: a `finish_releases` call sends a slow locker the same unlock twice in one look, taking it back both from another call that sends it and from the drain task its release queued it to.
//!
//! docs/guarantees.md, "Any runtime": `finish_releases` "takes them back
//! and sends them itself, where it is driven, once per call for each
//! unlock (so that several calls, each on a runtime of its own, neither
//! take an unlock from each other at every look nor send a slow locker the
//! same unlock again and again)".
//!
//! The scene: locker 0 takes every unlock but replies 60 s late (the
//! unlock timeout is 300 ms). Guard "a" is dropped on runtime `r1`, not
//! driven for now: its release is a batch on its way. Call D,
//! `finish_releases(5 s)` on paused runtime `p`, is polled once: it takes
//! the batch back and sends locker 0 the unlock (its send, recorded on the
//! queue, is on its way; D is neither polled again nor dropped). Then `r1`
//! is driven until its release task, whose own send timed out, queued the
//! unlock again and `r1`'s drain task is sending it (marked as taken by D
//! only, `QueueState::one_per_uid`); `r1` is not driven after that. Call
//! C, on paused runtime `p2`, is polled once: both copies of the unlock on
//! their way (D's and the drain task's) say C has not taken them, and
//! `QueueState::reclaim_stale` takes each of them back: C sends locker 0
//! the same unlock twice at its first look.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common::release_on_its_way::{poll_once, ReleaseOnItsWay, UnlockSenders};
use crate::common::{self};
use quorum_lock::Timeouts;

#[test]
fn a_finish_releases_call_takes_back_an_unlock_once_though_another_call_and_a_drain_task_both_send_it(
) {
    let senders = UnlockSenders::default();
    let slow_locker = senders.clone();
    let scene = ReleaseOnItsWay::with_timeouts(
        8002,
        Timeouts {
            unlock: Duration::from_millis(300),
            ..Timeouts::default()
        },
        move |hooked, slow| slow_locker.slow_locker(hooked, slow),
    );
    let (uid, r1) = (&scene.uid, &scene.dropped_on);

    let p = common::paused_runtime();
    let mut call_d = Box::pin(scene.ds.finish_releases(Duration::from_secs(5)));
    let first_d = p.block_on(poll_once(&mut call_d));
    let by_d = senders.by_call_on(uid, &p);
    // r1 is driven until its release task and then its drain task sent
    // locker 0 the unlock; not after that.
    let on_r1 = senders.drive_until_sent(r1, uid, 2);

    let p2 = common::paused_runtime();
    let mut call_c = Box::pin(scene.ds.finish_releases(Duration::from_secs(5)));
    let first_c = p2.block_on(poll_once(&mut call_c));
    let by_c = senders.by_call_on(uid, &p2);
    eprintln!(
        "D ready at first poll: {first_d}, its sends {by_d}; r1 sent the unlock {on_r1:?}; C \
         ready at first poll: {first_c}, its sends {by_c}; every unlock locker 0 was sent: {:?}",
        senders.all()
    );
    assert!(
        !first_d && by_d == 1,
        "control: D took the release back and sent it at its first poll"
    );
    assert!(
        on_r1.0,
        "control: r1's release task and then its drain task sent locker 0 the unlock"
    );
    assert!(!first_c, "control: C has unlocks to wait for");
    assert_eq!(
        by_c, 1,
        "one finish_releases call sends each unlock once; C sent locker 0 (slow to reply) the \
         same unlock {by_c} times at its first look: it took it back both from D and from r1's \
         drain task"
    );
    drop(call_c);
    drop(call_d);
}
