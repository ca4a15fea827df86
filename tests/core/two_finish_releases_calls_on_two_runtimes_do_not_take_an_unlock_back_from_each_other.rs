//! Reproduces a past break: two `finish_releases` calls running at once on two runtimes take the same owed unlock back from each other at every look (each passes over only its own copies), so the `Dsync`'s own drain task sends it again and again to a locker that took it at once, and both calls fail with `ReleasesPending`.
//!
//! `Dsync::finish_releases` (rustdoc) sends again at once "a release whose
//! task sits on a runtime that is no longer driven", and "Fails with
//! `Error::ReleasesPending` when releases are still running at the bound
//! (a lock server is unreachable, say)". A `Dsync` is shared by clones
//! across runtimes ("this client (and its clones)"), so two threads each
//! winding down their own runtime may each call it. Here the `Dsync`'s own
//! (driven) drain task retries one unlock at locker 2, which then answers
//! every call 200 ms late; two calls on two other runtimes wait for it.
//! Each copies back the batch made of the other's copies (`copied_by` is
//! the other call), and the drain task sends the same unlock once per
//! 200 ms for as long as they wait.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use crate::common;
use quorum_lock::testing::{CallKind, Latency, TestCluster};
use quorum_lock::Timeouts;

#[test]
fn two_finish_releases_calls_on_two_runtimes_do_not_take_an_unlock_back_from_each_other() {
    let seed = 5301;
    eprintln!("seed {seed}");
    let cluster = TestCluster::new(3, seed);
    let ds = common::with_timeouts(
        cluster.net_lockers(),
        seed,
        Timeouts {
            unlock: Duration::from_millis(300),
            ..Timeouts::default()
        },
    );
    let nodes = cluster.nodes();

    // "y" taken and unlocked on a plain thread while locker 2 hangs: the
    // release and locker 2's drain task run on the `Dsync`'s own runtime.
    let rt = common::runtime();
    let uid = rt.block_on(async {
        let guard = common::try_lock(&ds, "y").await;
        let uid = guard.uid().to_owned();
        nodes[2].set_hang(true);
        let unlocked = common::unlock_on_a_plain_thread(guard).await;
        assert!(unlocked.is_ok(), "two of three confirm: {unlocked:?}");
        uid
    });
    let started = Instant::now();
    let seen = nodes[2].stats(CallKind::Unlock).seen;
    while nodes[2].stats(CallKind::Unlock).seen < seen + 2 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the drain task retries the unlock"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        common::holds(&cluster.lockers()[2], &uid),
        "control: locker 2 still holds the uid"
    );

    // Locker 2 answers again, each call 200 ms late (within the 300 ms
    // unlock timeout); two threads call finish_releases at once.
    nodes[2].set_latency(Latency::Fixed(Duration::from_millis(200)));
    nodes[2].set_hang(false);
    let before = nodes[2].stats(CallKind::Unlock).seen;
    let began = Instant::now();
    let (first, second) = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..2)
            .map(|_| {
                let ds = ds.clone();
                scope.spawn(move || {
                    common::runtime().block_on(ds.finish_releases(Duration::from_secs(3)))
                })
            })
            .collect();
        let mut results = calls.into_iter().map(|call| call.join().expect("no panic"));
        (results.next().unwrap(), results.next().unwrap())
    });
    let took = began.elapsed();
    let sent = nodes[2].stats(CallKind::Unlock).seen - before;
    let held = common::holds(&cluster.lockers()[2], &uid);
    eprintln!(
        "two finish_releases(3 s): {first:?} and {second:?} after {took:?}; locker 2 was sent \
         {sent} unlocks meanwhile and holds the uid: {held}"
    );
    assert!(!held, "control: locker 2 took the unlock");
    assert!(
        first.is_ok() && second.is_ok() && sent <= 4,
        "locker 2 answers every unlock 200 ms late and took the one it was owed, yet two \
         finish_releases(3 s) calls on two runtimes returned {first:?} and {second:?} after \
         {took:?}, and locker 2 was sent the same unlock {sent} times meanwhile: each call \
         takes back the batch of the other's copies at every look"
    );
    drop(rt);
}
