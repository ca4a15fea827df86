//! `finish_releases` takes back the batch a drain task is sending only
//! once, and not from a task that is driven and sending it: the `Dsync`'s
//! own runtime, always driven, drains a locker's queue while that locker
//! hangs, then answers.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": "The queue
//! probes a failing locker with one unlock per backoff step, however many
//! it owes", and a failed unlock "is retried with backoff until it lands".
//! `Dsync::finish_releases` sends again at once "a release whose task sits
//! on a runtime that is no longer driven", and fails with
//! `Error::ReleasesPending` "when releases are still running at the bound
//! (a lock server is unreachable, say)".
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use crate::common;
use quorum_lock::testing::{CallKind, Latency, TestCluster};
use quorum_lock::{Dsync, Timeouts};

/// "y" taken and unlocked on a plain thread while locker 2 hangs (so the
/// release and locker 2's drain task run on the `Dsync`'s own runtime),
/// once that drain task has retried the unlock at locker 2. Returns the
/// runtime the lock was taken on, kept until the end, and the uid.
fn a_retry_on_the_dsyncs_own_runtime(
    cluster: &TestCluster,
    ds: &Dsync,
) -> (tokio::runtime::Runtime, String) {
    let nodes = cluster.nodes();
    let rt = common::runtime();
    let uid = rt.block_on(async {
        let guard = common::try_lock(ds, "y").await;
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
    (rt, uid)
}

/// A cluster of 3 with a 300 ms unlock timeout.
fn cluster_and_client(seed: u64) -> (TestCluster, Dsync) {
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
    (cluster, ds)
}

/// Reproduces a past break: `finish_releases` took back, at every look, the batch the `Dsync`'s own (driven) drain task was sending to a hanging locker, and that task queued its failed batch beside the copy: one owed unlock grew to 256 copies in 4 s and was sent 512 times once the locker answered.
#[test]
fn finish_releases_does_not_multiply_a_retry_a_driven_drain_task_is_sending() {
    let (cluster, ds) = cluster_and_client(5101);
    let nodes = cluster.nodes();
    let (rt, uid) = a_retry_on_the_dsyncs_own_runtime(&cluster, &ds);

    let during = nodes[2].stats(CallKind::Unlock).seen;
    let finished = common::runtime().block_on(ds.finish_releases(Duration::from_secs(4)));
    let sent_during = nodes[2].stats(CallKind::Unlock).seen - during;
    eprintln!(
        "finish_releases(4 s) with locker 2 hanging: {finished:?}; unlocks it was sent \
         meanwhile: {sent_during}"
    );
    assert!(finished.is_err(), "locker 2 still holds the uid");

    // Locker 2 answers again: the one unlock it is owed lands.
    let before = nodes[2].stats(CallKind::Unlock).seen;
    nodes[2].set_hang(false);
    let started = Instant::now();
    while common::holds(&cluster.lockers()[2], &uid) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the drain task frees locker 2 once it answers"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Whatever else is on its way lands too.
    std::thread::sleep(Duration::from_secs(2));
    let after = nodes[2].stats(CallKind::Unlock).seen - before;
    eprintln!("unlocks locker 2 was sent once it answered: {after}");
    assert!(
        after <= 3,
        "locker 2, owed one unlock, was sent it {after} times once it answered (and \
         {sent_during} times in the 4 s finish_releases waited): finish_releases copied back \
         into the queue, at every look, the batch the Dsync's own (driven) drain task was \
         sending, beside the copy that task puts back when its call fails"
    );
    drop(rt);
}

/// Reproduces a past break: with the `Dsync`'s own drain task sending the unlock to a locker that answers 200 ms late, `finish_releases` copied the batch back at every look, the task sent the same unlock 13 times, and `finish_releases(3 s)` returned `ReleasesPending` though the locker took it at once.
#[test]
fn finish_releases_returns_once_a_slow_locker_took_the_unlock_a_driven_drain_task_sends() {
    let (cluster, ds) = cluster_and_client(5102);
    let nodes = cluster.nodes();
    let (rt, uid) = a_retry_on_the_dsyncs_own_runtime(&cluster, &ds);

    // Locker 2 answers calls again, each 200 ms late (within the 300 ms
    // unlock timeout).
    nodes[2].set_latency(Latency::Fixed(Duration::from_millis(200)));
    nodes[2].set_hang(false);
    let before = nodes[2].stats(CallKind::Unlock).seen;
    let began = Instant::now();
    let finished = common::runtime().block_on(ds.finish_releases(Duration::from_secs(3)));
    let took = began.elapsed();
    let sent = nodes[2].stats(CallKind::Unlock).seen - before;
    let held = common::holds(&cluster.lockers()[2], &uid);
    eprintln!(
        "finish_releases(3 s): {finished:?} after {took:?}; locker 2 was sent {sent} unlocks \
         meanwhile and holds the uid: {held}"
    );
    assert!(!held, "control: locker 2 took the unlock");
    assert!(
        finished.is_ok() && sent <= 3,
        "locker 2 answers every unlock 200 ms late and took the one it was owed, yet \
         finish_releases(3 s) returned {finished:?} after {took:?}, and locker 2 was sent the \
         same unlock {sent} times meanwhile: the batch the Dsync's own drain task sends is \
         copied back into the queue at every look, and sent again and again"
    );
    drop(rt);
}

/// Reproduces a past break: two `finish_releases` calls running at once on two runtimes take the same owed unlock back from each other at every look (each passes over only its own copies), so the `Dsync`'s own drain task sends it again and again to a locker that took it at once, and both calls fail with `ReleasesPending`.
///
/// A `Dsync` is shared by clones across runtimes ("this client (and its
/// clones)"), so two threads each winding down their own runtime may each
/// call it. Here the `Dsync`'s own (driven) drain task retries one unlock
/// at locker 2, which then answers every call 200 ms late; two calls on
/// two other runtimes wait for it.
#[test]
fn two_finish_releases_calls_on_two_runtimes_do_not_take_an_unlock_back_from_each_other() {
    calls_at_once_end_once_the_unlock_landed(2, 5301, 4);
}

/// Reproduces a past break: nine `finish_releases` calls at once on nine runtimes (one more than the eight calls an owed unlock remembered having taken it back) took the same unlock back from each other for as long as they waited, and every one failed with `ReleasesPending` though the locker took the unlock at once; with eight calls or fewer they all returned `Ok`.
///
/// Each thread of a thread-per-core service winding down its own runtime
/// may call it. An unlock now remembers every running call that took it
/// back (a call forgets itself as it ends), and a call sends what it took
/// back itself.
#[test]
fn nine_finish_releases_calls_on_nine_runtimes_end_once_the_unlock_they_wait_for_landed() {
    calls_at_once_end_once_the_unlock_landed(9, 5309, 11);
}

/// Locker 2, whose unlock the `Dsync`'s own drain task retries, answers
/// again, each call 200 ms late (within the 300 ms unlock timeout);
/// `calls` threads each call `finish_releases(3 s)` on a runtime of their
/// own at once. Every call must return `Ok`, and locker 2 be sent the
/// unlock at most `most_sends` times meanwhile.
fn calls_at_once_end_once_the_unlock_landed(calls: usize, seed: u64, most_sends: u64) {
    let (cluster, ds) = cluster_and_client(seed);
    let nodes = cluster.nodes();
    let (rt, uid) = a_retry_on_the_dsyncs_own_runtime(&cluster, &ds);
    nodes[2].set_latency(Latency::Fixed(Duration::from_millis(200)));
    nodes[2].set_hang(false);
    let before = nodes[2].stats(CallKind::Unlock).seen;
    let began = Instant::now();
    let results: Vec<_> = std::thread::scope(|scope| {
        let running: Vec<_> = (0..calls)
            .map(|_| {
                let ds = ds.clone();
                scope.spawn(move || {
                    common::runtime().block_on(ds.finish_releases(Duration::from_secs(3)))
                })
            })
            .collect();
        running
            .into_iter()
            .map(|call| call.join().expect("no panic"))
            .collect()
    });
    let took = began.elapsed();
    let sent = nodes[2].stats(CallKind::Unlock).seen - before;
    let held = common::holds(&cluster.lockers()[2], &uid);
    let failed = results.iter().filter(|r| r.is_err()).count();
    eprintln!(
        "{calls} finish_releases(3 s): {failed} failed ({results:?}) after {took:?}; locker 2 was \
         sent {sent} unlocks meanwhile and holds the uid: {held}"
    );
    assert!(!held, "control: locker 2 took the unlock");
    assert!(
        failed == 0 && sent <= most_sends,
        "locker 2 answers every unlock 200 ms late and took the one it was owed, yet of \
         {calls} finish_releases(3 s) calls on {calls} runtimes {failed} returned \
         ReleasesPending after {took:?}, and locker 2 was sent the same unlock {sent} times \
         meanwhile: the calls take it back from each other again and again"
    );
    drop(rt);
}
