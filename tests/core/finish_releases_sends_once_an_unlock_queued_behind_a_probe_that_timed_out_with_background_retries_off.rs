//! Reproduces a past break: with `Timeouts::release_retry` zero, an unlock queued behind a probe that timed out is marked sent though it never left, is given up unsent, and `finish_releases` returns Ok while an answering locker holds its lock.
//!
//! docs/guarantees.md, "Any runtime": "An unlock never sent is sent once,
//! however late it is found, whatever `Timeouts::release_retry` says", and
//! `finish_releases` "sends a release's unlocks again at once".
//! `Timeouts::release_retry`: "Zero turns the background retries off ...
//! (an unlock never sent yet, such as the release of a guard dropped on a
//! runtime that stopped being driven, is still sent once)".
//! `Dsync::finish_releases` waits "until every release ... handed to the
//! background has finished". "No leaks": dropping a guard "never leaves an
//! entry behind on a reachable locker".
//!
//! A drain task probes a locker with the first unlock of its batch; when
//! the probe fails, the whole batch goes back to the queue marked as sent
//! (`PendingUnlock::sent`), also the unlocks behind the probe that were
//! never sent. Once their window is over they are given up unsent.
//!
//! The scene (real clock, as the guards' runtime must stop being driven):
//! three lockers, unlock timeout 500 ms, retry window zero. Locker 2
//! applies every unlock of "a" at once but its reply takes 10 s (each such
//! call times out); it answers everything else at once. On runtime
//! `idle`, "a" and then "b" are taken and both guards dropped as
//! `block_on` returns, so none of their unlocks is sent; `idle` is kept,
//! never driven again. On another runtime `finish_releases(6 s)` sends
//! them: locker 2's queue holds "a"'s unlock and then "b"'s. "b"'s should
//! reach locker 2, which answers it at once.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::testing::{CallKind, Route, TestCluster};
use quorum_lock::Timeouts;

use crate::common::{self, holding};

const SEED: u64 = 48_001;

#[test]
fn finish_releases_sends_once_an_unlock_queued_behind_a_probe_that_timed_out_with_background_retries_off(
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    // Unlocks of "b" that reach locker 2.
    let b_unlocks = Arc::new(AtomicUsize::new(0));
    let lockers = {
        let b_unlocks = b_unlocks.clone();
        cluster.relayed_lockers(move |i, kind, args| {
            let of = |name: &str| args.resources.iter().any(|r| r == name);
            match (i, kind) {
                (2, CallKind::Unlock) if of("a") => Route::SlowReply(Duration::from_secs(10)),
                (2, CallKind::Unlock) if of("b") => {
                    b_unlocks.fetch_add(1, Ordering::SeqCst);
                    Route::Forward
                }
                _ => Route::Forward,
            }
        })
    };
    let ds = common::with_timeouts(
        lockers,
        SEED,
        Timeouts {
            unlock: Duration::from_millis(500),
            release_retry: Duration::ZERO,
            ..Timeouts::default()
        },
    );

    let idle = common::runtime();
    let uid_b = idle.block_on(async {
        let a = common::try_lock(&ds, "a").await;
        let b = common::try_lock(&ds, "b").await;
        let uid_b = b.uid().to_owned();
        drop(a);
        drop(b);
        uid_b
    });
    assert_eq!(
        holding(cluster.lockers(), &uid_b),
        [true, true, true],
        "b's unlocks were never sent on the idle runtime"
    );

    let other = common::runtime();
    let finished = other.block_on(ds.finish_releases(Duration::from_secs(6)));
    let left = holding(cluster.lockers(), &uid_b);
    let sent = b_unlocks.load(Ordering::SeqCst);
    eprintln!(
        "finish_releases {finished:?}; lockers holding b's uid {left:?}; b's unlocks that reached \
         locker 2: {sent}"
    );
    assert!(
        !(finished.is_ok() && left.iter().any(|h| *h)),
        "finish_releases returned {finished:?} while the lockers holding b are {left:?} ({sent} \
         unlocks of b reached locker 2, which answers at once): b's unlock, queued behind a probe \
         of a's that timed out, was marked sent without being sent and given up"
    );
    drop(idle);
}
