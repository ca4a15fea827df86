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

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use crate::common::hooked::{Call, Hooked, Late};
use crate::common::{self};
use quorum_lock::{NetLocker, Timeouts};

const SEED: u64 = 8002;

/// Who sent locker 0 an unlock: its runtime, and whether from a spawned
/// task (a release or drain task) or a `block_on` future (a call driven
/// there).
type Sender = (tokio::runtime::Id, bool);

#[test]
fn a_finish_releases_call_takes_back_an_unlock_once_though_another_call_and_a_drain_task_both_send_it(
) {
    eprintln!("seed {SEED}");
    let nodes = common::nodes(3);
    let seen: Arc<Mutex<Vec<(String, Sender)>>> = Arc::default();
    let slow = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut lockers: Vec<Arc<dyn NetLocker>> = common::as_lockers(&nodes);
    {
        let counted = seen.clone();
        lockers[0] = Hooked::new(nodes[0].clone())
            .refusing(move |call, args| {
                if call == Call::Unlock {
                    let sender = (
                        tokio::runtime::Handle::current().id(),
                        tokio::task::try_id().is_some(),
                    );
                    counted.lock().unwrap().push((args.uid.to_string(), sender));
                }
                None
            })
            .unlocks_late_while(slow.clone(), Late::Replying, Duration::from_secs(60))
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

    let r1 = common::runtime();
    let a = r1.block_on(common::try_lock(&ds, "a"));
    let uid = a.uid().to_owned();
    slow.store(true, std::sync::atomic::Ordering::SeqCst);
    // Dropped on r1, not driven for now: its release task has not run.
    common::drop_on_an_idle_runtime(&r1, a);
    let (p1, p) = (r1.handle().id(), common::paused_runtime());
    let sent_by = |who: &dyn Fn(&Sender) -> bool| {
        let seen = seen.lock().unwrap();
        seen.iter().filter(|(u, s)| *u == uid && who(s)).count()
    };

    let mut call_d = Box::pin(ds.finish_releases(Duration::from_secs(5)));
    let first_d = p.block_on(std::future::poll_fn(|cx| {
        Poll::Ready(call_d.as_mut().poll(cx).is_ready())
    }));
    let pid = p.handle().id();
    let by_d = sent_by(&|s: &Sender| s.0 == pid && !s.1);
    // r1 is driven until its release task and then its drain task sent
    // locker 0 the unlock (bounded: 10 s); not after that.
    let on_r1 = r1.block_on(async {
        let waited = tokio::time::timeout(Duration::from_secs(10), async {
            while sent_by(&|s: &Sender| s.0 == p1) < 2 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        (waited.is_ok(), sent_by(&|s: &Sender| s.0 == p1))
    });

    let p2 = common::paused_runtime();
    let mut call_c = Box::pin(ds.finish_releases(Duration::from_secs(5)));
    let first_c = p2.block_on(std::future::poll_fn(|cx| {
        Poll::Ready(call_c.as_mut().poll(cx).is_ready())
    }));
    let p2id = p2.handle().id();
    let by_c = sent_by(&|s: &Sender| s.0 == p2id && !s.1);
    eprintln!(
        "D ready at first poll: {first_d}, its sends {by_d}; r1 sent the unlock {on_r1:?}; C \
         ready at first poll: {first_c}, its sends {by_c}; every unlock locker 0 was sent: {:?}",
        seen.lock().unwrap()
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
    drop(r1);
}
