//! Reproduces a past break: after a guard was dropped while a straggler of its won round was on its way, `finish_releases` reported a release pending (and held the `Dsync` alive) until `Timeouts::acquire` + 100 ms had passed, long after the straggler answered and every locker had confirmed its unlock.
//!
//! src/lock/dsync.rs, `Dsync::finish_releases`: "Waits, at most `within`,
//! until every release this client (and its clones) handed to the
//! background has finished ... Fails with [`Error::ReleasesPending`] when
//! releases are still running at the bound (a lock server is unreachable,
//! say)". docs/guarantees.md, "A lost lock is freed once its holder lets
//! go": "`Dsync::finish_releases(bound)` waits for these releases, and
//! every other one handed to the background, before a process exits."
//!
//! What happens instead: three lockers that all answer; locker 2's reply
//! to the lock call takes 50 ms. `try_lock` wins with lockers 0 and 1; the
//! guard is dropped at once, so locker 2's call is a straggler, which
//! undoes its own grant when its reply comes 50 ms later. Every locker is
//! free by then. But the release also started `release::watch_stragglers`,
//! which sleeps until `Timeouts::acquire` (here 20 s, allowed below the
//! lease's 50 s trust window) + 100 ms before it even looks, counted among
//! the outstanding releases all along, whether or not the straggler has
//! answered: `finish_releases(5 s)` fails with `ReleasesPending` though
//! nothing is left to release.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common::{self, holding};
use quorum_lock::testing::{CallKind, Route, TestCluster};
use quorum_lock::Timeouts;

const SEED: u64 = 36_312;

#[tokio::test(start_paused = true)]
async fn finish_releases_returns_once_a_straggler_answered_and_every_release_ended() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let lockers = cluster.relayed_lockers(move |i, kind, _| {
        if i == 2 && kind == CallKind::Lock {
            Route::SlowReply(Duration::from_millis(50))
        } else {
            Route::Forward
        }
    });
    let ds = common::with_timeouts(
        lockers,
        SEED,
        Timeouts {
            acquire: Duration::from_secs(20),
            ..Timeouts::default()
        },
    );
    let guard = tokio::time::timeout(
        Duration::from_secs(2),
        ds.rw_mutex(["x"]).unwrap().try_lock(),
    )
    .await
    .expect("in time")
    .expect("lockers 0 and 1 grant");
    let uid = guard.uid().to_owned();
    drop(guard);
    // The straggler answers after 50 ms and undoes its grant.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let left = holding(cluster.lockers(), &uid);
    assert_eq!(left, [false, false, false], "every locker is free");
    let finished = ds.finish_releases(Duration::from_secs(5)).await;
    eprintln!("entries {left:?}; finish_releases(5 s) gave {finished:?}");
    assert!(
        finished.is_ok(),
        "every locker confirmed and the straggler ended, yet finish_releases(5 s) gave \
         {finished:?}"
    );
}
