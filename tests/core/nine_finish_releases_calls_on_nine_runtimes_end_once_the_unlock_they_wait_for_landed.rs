//! Reproduces a past break: nine `finish_releases` calls at once on nine runtimes (one more than the eight calls an owed unlock remembers having taken it back) take the same unlock back from each other for as long as they wait, and every one fails with `ReleasesPending` though the locker took the unlock at once; with eight calls or fewer they all return `Ok`.
//!
//! `Dsync::finish_releases` (rustdoc) sends again at once "a release whose
//! task sits on a runtime that is no longer driven", and "Fails with
//! `Error::ReleasesPending` when releases are still running at the bound
//! (a lock server is unreachable, say)". A `Dsync` is shared by clones
//! across runtimes ("this client (and its clones)"), so each thread of a
//! thread-per-core service winding down its own runtime may call it. Here
//! the `Dsync`'s own (driven) drain task retries one unlock at locker 2,
//! which then answers every call 200 ms late; nine calls on nine other
//! runtimes wait for it. `PendingUnlock::hurried` keeps the newest eight
//! calls that took the unlock back (`REMEMBERED` in
//! `QueueState::reclaim_stale`): the ninth pushes out the first, which may
//! then take it back again, and so on round the nine, so the batch is
//! never left to finish.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use crate::common;
use quorum_lock::testing::{CallKind, Latency, TestCluster};
use quorum_lock::Timeouts;

const CALLS: usize = 9;
const SENDS: u64 = CALLS as u64 + 2;

#[test]
fn nine_finish_releases_calls_on_nine_runtimes_end_once_the_unlock_they_wait_for_landed() {
    let seed = 5309;
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
    let results: Vec<_> = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..CALLS)
            .map(|_| {
                let ds = ds.clone();
                scope.spawn(move || {
                    common::runtime().block_on(ds.finish_releases(Duration::from_secs(3)))
                })
            })
            .collect();
        calls
            .into_iter()
            .map(|call| call.join().expect("no panic"))
            .collect()
    });
    let took = began.elapsed();
    let sent = nodes[2].stats(CallKind::Unlock).seen - before;
    let held = common::holds(&cluster.lockers()[2], &uid);
    let failed = results.iter().filter(|r| r.is_err()).count();
    eprintln!(
        "{CALLS} finish_releases(3 s): {failed} failed ({results:?}) after {took:?}; locker 2 was \
         sent {sent} unlocks meanwhile and holds the uid: {held}"
    );
    assert!(!held, "control: locker 2 took the unlock");
    assert!(
        failed == 0 && sent <= SENDS,
        "locker 2 answers every unlock 200 ms late and took the one it was owed, yet of \
         {CALLS} finish_releases(3 s) calls on {CALLS} runtimes {failed} returned \
         ReleasesPending after {took:?}, and locker 2 was sent the same unlock {sent} times \
         meanwhile: an unlock remembers only the last 8 calls that took it back, so with more \
         calls than that they take it back from each other again and again"
    );
    drop(rt);
}
