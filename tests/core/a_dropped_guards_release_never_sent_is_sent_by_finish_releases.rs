//! A dropped guard's release that was never sent (its runtime stopped
//! being driven, or shut down, as the guard was dropped) is sent once by
//! `finish_releases` on another runtime, whatever `Timeouts::release_retry`
//! says and however late it is found: `finish_releases` never reports done
//! while a locker that answers still holds the lock.
//!
//! Every scene: three in-process lockers; "y" is taken with `try_lock` on
//! a runtime of its own and its guard dropped as `block_on` returns; then
//! `finish_releases(3 s)` runs on another runtime.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::Timeouts;

/// Reproduces a past break: with `Timeouts::release_retry` zero, the release of a guard dropped on a runtime no longer driven is given up unsent once overdue, and `finish_releases` returns Ok while every locker holds the lock.
///
/// `Timeouts::release_retry`: "Zero turns the background retries off and
/// leaves failed releases to expiry": it is about *failed* unlocks.
/// `Dsync::finish_releases` waits "until every release ... handed to the
/// background has finished: ... guards dropped without `unlock()`".
/// docs/guarantees.md, "Any runtime": a release a runtime began and then
/// stopped driving "is recorded on the lockers' queues as on its way; once
/// overdue ..., any other drain task or `finish_releases` sends it again".
///
/// The scene (real clock, as the guard's runtime must stop being driven):
/// unlock timeout 500 ms, retry window zero. "y" is taken on runtime `idle`
/// and its guard dropped as `block_on` returns, so its unlocks are never
/// sent. On another runtime `finish_releases` finds the batch overdue after
/// 1.1 s and puts it back in the queues with a retry window that ends the
/// moment it is overdue; the drain task gives it up without sending it.
#[test]
fn finish_releases_does_not_report_done_a_dropped_guards_release_never_sent_with_background_retries_off(
) {
    never_sent_release_is_sent_by_finish_releases(
        4517,
        Timeouts {
            unlock: Duration::from_millis(500),
            release_retry: Duration::ZERO,
            ..Timeouts::default()
        },
        Then::Idle,
        "dropped guard's release was never sent, and was given up as a failed unlock once it was overdue, background retries being off",
    );
}

/// Reproduces a past break: under a `Timeouts::release_retry` shorter than twice the unlock timeout, the release of a guard dropped on a runtime no longer driven is given up unsent once overdue, and `finish_releases` returns Ok while every locker holds the lock.
///
/// `Dsync::finish_releases`: waits "until every release this client ...
/// handed to the background has finished: ... guards dropped without
/// `unlock()`", and fails with `Error::ReleasesPending` "when releases are
/// still running at the bound". docs/guarantees.md, "Any runtime": a
/// release a runtime began and then stopped driving "is recorded on the
/// lockers' queues as on its way; once overdue ..., any other drain task or
/// `finish_releases` sends it again". `Timeouts::release_retry` caps how
/// long *failed* unlocks are retried; this one was never sent.
///
/// The scene (real clock, as the guard's runtime must stop being driven):
/// unlock timeout 500 ms, retry window 200 ms. "y" is taken on runtime
/// `idle` and its guard dropped as `block_on` returns. On another runtime
/// `finish_releases` finds the batch overdue after 1.1 s, puts it back in
/// the queues with its retry window (counted from the drop) long over, and
/// the drain task gives it up without sending it: Ok, and all three
/// lockers still hold y.
#[test]
fn finish_releases_does_not_report_done_a_dropped_guards_release_never_sent_under_a_short_retry_window(
) {
    never_sent_release_is_sent_by_finish_releases(
        4503,
        Timeouts {
            unlock: Duration::from_millis(500),
            release_retry: Duration::from_millis(200),
            ..Timeouts::default()
        },
        Then::Idle,
        "dropped guard's release was never sent, and was given up as a failed unlock past its retry window once it was overdue",
    );
}

/// Reproduces a past break: with `Timeouts::release_retry` zero, the release of a guard dropped on a runtime shut down before its task ran is queued already given up, never sent, and `finish_releases` returns Ok while every locker holds the lock.
///
/// `Timeouts::release_retry`: "Zero turns the background retries off and
/// leaves failed releases to expiry": it is about *failed* unlocks.
/// docs/guarantees.md, "Any runtime": "Every unlock is owed from the moment
/// its release is planned: a release task that a runtime shut down drops
/// unrun or cuts short queues what it had not done". `Dsync::finish_releases`
/// waits "until every release ... handed to the background has finished:
/// ... guards dropped without `unlock()`".
///
/// The scene (real clock): "y" is taken on runtime `gone`, its guard
/// dropped there, and `gone` is dropped at once: the release task never
/// ran, and each `Owed` queues its unlock with a retry window that ends as
/// it is queued (`owed_give_up`). `finish_releases` on another runtime
/// sees the drain task give them up without sending any.
#[test]
fn finish_releases_does_not_report_done_a_dropped_guards_release_never_sent_before_its_runtime_shut_down_with_background_retries_off(
) {
    never_sent_release_is_sent_by_finish_releases(
        4637,
        Timeouts {
            release_retry: Duration::ZERO,
            ..Timeouts::default()
        },
        Then::ShutDown,
        "dropped guard's release never ran, and its owed unlocks were queued already given up",
    );
}

/// Reproduces a past break: with `Timeouts::release_retry` zero, the release of a guard dropped on a runtime no longer driven, found overdue only once its one-send window had passed, is given up unsent, and `finish_releases` returns Ok while every locker holds the lock.
///
/// `Timeouts::release_retry`: "Zero turns the background retries off and
/// leaves failed releases to expiry (an unlock never sent yet, such as the
/// release of a guard dropped on a runtime that stopped being driven, is
/// still sent once)". `Dsync::finish_releases` waits "until every release
/// ... handed to the background has finished: ... guards dropped without
/// `unlock()`". docs/guarantees.md, "Any runtime": a release a runtime
/// began and then stopped driving "is recorded on the lockers' queues as on
/// its way; once overdue ..., any other drain task or `finish_releases`
/// sends it again".
///
/// The window of that one send is fixed when the guard is dropped
/// (`owe_batch`: the batch's deadline plus one more batch deadline), not
/// when the overdue batch is found: a `finish_releases` that comes later
/// than that puts the batch back in the queues already expired, and the
/// drain task gives it up without ever sending it.
///
/// The scene (real clock, as the guard's runtime must stop being driven):
/// unlock timeout 500 ms (overdue after 1.1 s, one-send window over at
/// 2.2 s), retry window zero. "y" is taken on runtime `idle` and its guard
/// dropped as `block_on` returns, so its unlocks are never sent. The
/// process does other work for 3 s; then, on another runtime,
/// `finish_releases(3 s)`: it should send the unlocks once.
#[test]
fn finish_releases_sends_once_a_dropped_guards_release_found_overdue_late_with_background_retries_off(
) {
    never_sent_release_is_sent_by_finish_releases(
        47_002,
        Timeouts {
            unlock: Duration::from_millis(500),
            release_retry: Duration::ZERO,
            ..Timeouts::default()
        },
        Then::IdleFor(Duration::from_secs(3)),
        "dropped guard's release, never sent, was found overdue after its one-send window had passed and given up unsent, background retries being off",
    );
}

/// What becomes of the runtime the guard was dropped on.
enum Then {
    /// Kept, never driven again.
    Idle,
    /// Shut down at once.
    ShutDown,
    /// Kept idle while the process does other work this long before
    /// `finish_releases`.
    IdleFor(Duration),
}

/// The scene (see the module's doc) with `timeouts`; `why` says what went
/// wrong when `finish_releases` reports done with a locker still holding.
fn never_sent_release_is_sent_by_finish_releases(
    seed: u64,
    timeouts: Timeouts,
    then: Then,
    why: &str,
) {
    eprintln!("seed {seed}");
    let cluster = TestCluster::new(3, seed);
    let ds = common::with_timeouts(cluster.net_lockers(), seed, timeouts);
    let runtime = common::runtime();
    let uid = runtime.block_on(async {
        let guard = common::try_lock(&ds, "y").await;
        let uid = guard.uid().to_owned();
        drop(guard);
        uid
    });
    let kept = match then {
        Then::Idle => Some(runtime),
        Then::ShutDown => {
            drop(runtime);
            None
        }
        Then::IdleFor(other_work) => {
            // No runtime of this `Dsync` is driven meanwhile (the lease's
            // validity, 60 s by default, is far).
            std::thread::sleep(other_work);
            assert_eq!(
                common::holding(cluster.lockers(), &uid),
                [true, true, true],
                "the dropped guard's unlocks were never sent"
            );
            Some(runtime)
        }
    };
    let (finished, left) =
        common::finish_elsewhere(&ds, cluster.lockers(), &uid, Duration::from_secs(3));
    assert!(
        !(finished.is_ok() && left.iter().any(|h| *h)),
        "finish_releases returned {finished:?} while the lockers holding y are {left:?}: {why}"
    );
    drop(kept);
}
