//! Reproduces a past break: a `finish_releases` call sends a slow locker an unlock it already sent it again, because the release it took the unlock back from queued it afresh and a drain task of that release's runtime took it up.
//!
//! docs/guarantees.md, "Any runtime": `finish_releases` "takes them back
//! and sends them itself, where it is driven, once per call for each
//! unlock (so that several calls, each on a runtime of its own, neither
//! take an unlock from each other at every look nor send a slow locker the
//! same unlock again and again)".
//!
//! The scene: locker 0 takes every unlock but replies 60 s late (the
//! unlock timeout is 300 ms). Guard "a" is dropped on runtime `r1`: its
//! release is a batch on its way. Call A, `finish_releases(5 s)` on a
//! paused runtime, is polled once: it takes the batch back and sends
//! locker 0 the unlock. Then `r1` is driven until its release task, whose
//! own send timed out, queued the unlock again and `r1`'s drain task is
//! sending it; `r1` is not driven after that. A is driven on: its send
//! times out at 300 ms, and at its next look it takes back the drain
//! task's batch (the unlock there, queued afresh, no longer says A took
//! it) and sends locker 0 the same unlock a second time.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common::release_on_its_way::{poll_once, ReleaseOnItsWay, UnlockSenders};
use crate::common::{self};
use quorum_lock::Timeouts;

#[test]
fn a_finish_releases_call_sends_a_slow_locker_an_unlock_once_though_its_release_queued_it_again() {
    let senders = UnlockSenders::default();
    let slow_locker = senders.clone();
    let scene = ReleaseOnItsWay::with_timeouts(
        7604,
        Timeouts {
            unlock: Duration::from_millis(300),
            ..Timeouts::default()
        },
        move |hooked, slow| slow_locker.slow_locker(hooked, slow),
    );
    let (uid, r1, p) = (&scene.uid, &scene.dropped_on, common::paused_runtime());

    let mut call_a = Box::pin(scene.ds.finish_releases(Duration::from_secs(5)));
    let first_a = p.block_on(poll_once(&mut call_a));
    let at_first_poll = senders.by_call_on(uid, &p);
    // r1 is driven until its release task and then its drain task sent
    // locker 0 the unlock; not after that.
    let on_r1 = senders.drive_until_sent(r1, uid, 2);
    let finished = p.block_on(call_a);
    let sends_a = senders.by_call_on(uid, &p);
    eprintln!(
        "A ready at first poll: {first_a}, its sends then {at_first_poll}; r1 sent the unlock \
         {on_r1:?}; A returned {finished:?}; A sent locker 0 the unlock {sends_a} times in all; \
         every unlock locker 0 was sent: {:?}",
        senders.all()
    );
    assert!(
        !first_a && at_first_poll == 1,
        "control: A took the release back and sent it at its first poll"
    );
    assert!(
        on_r1.0,
        "control: r1's release task and then its drain task sent locker 0 the unlock"
    );
    assert_eq!(
        sends_a, 1,
        "one finish_releases call sends each unlock once; A sent locker 0 (slow to reply) the \
         same unlock {sends_a} times: it took it back again from r1's drain task, to which its \
         release had queued it afresh"
    );
}
