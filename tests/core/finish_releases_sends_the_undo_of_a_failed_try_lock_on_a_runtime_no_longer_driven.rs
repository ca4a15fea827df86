//! Reproduces a past break: the undo of a failed `try_lock`'s partial grant, begun on a runtime that is then no longer driven, is never sent, and `finish_releases` on another runtime waits out its bound with the grant left in place.
//!
//! docs/guarantees.md, "Any runtime": "Every unlock is owed from the moment
//! its release is planned"; "A release a runtime began and then stopped
//! driving (a guard dropped as its `block_on` returns, a retry a drain task
//! was sending) is recorded on the lockers' queues as on its way; once
//! overdue (twice the unlock timeout, and a little), any other drain task
//! or `finish_releases` sends it again". `Dsync::finish_releases` waits for
//! "the grants and places of abandoned waits" and is to be called "before
//! the process exits". A dropped guard's release is recorded so
//! (`OwedBatch`); an abandoned round's undo (`release::abandon`) is only
//! spawned on the runtime it was planned on, and counted as outstanding.
//!
//! The scene (real clock, as the runtime must stop being driven): three
//! lockers; "direct" holds "y" on lockers 1 and 2. On runtime `idle`, x's
//! `try_lock` of "y" is granted by locker 0 only, fails, and its undo is
//! planned there as `block_on` returns; `idle` is kept, never driven
//! again. On another runtime `finish_releases(3 s)` (unlock timeout 500 ms:
//! overdue after 1.1 s) should see locker 0's grant undone.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::{NetLocker, Timeouts};

const SEED: u64 = 4623;

#[test]
fn finish_releases_sends_the_undo_of_a_failed_try_lock_on_a_runtime_no_longer_driven() {
    eprintln!("seed {SEED}");
    let nodes = common::nodes(3);
    let ds = common::with_timeouts(
        common::as_lockers(&nodes),
        SEED,
        Timeouts {
            unlock: Duration::from_millis(500),
            ..Timeouts::default()
        },
    );

    let idle = common::runtime();
    idle.block_on(async {
        for node in &nodes[1..] {
            let held = node
                .lock(&common::args("direct-y", &["y"]))
                .await
                .expect("a local locker answers");
            assert!(held, "locker takes direct's entry");
        }
        let tried = tokio::time::timeout(
            Duration::from_secs(5),
            ds.rw_mutex(["y"]).unwrap().try_lock(),
        )
        .await
        .expect("in time");
        assert!(tried.is_err(), "only locker 0 is free: {tried:?}");
    });
    let x_on_0 = || {
        nodes[0]
            .snapshot()
            .iter()
            .any(|e| e.resource == "y" && e.owner == "x")
    };
    eprintln!(
        "locker 0 holds x's grant of y after the failed try_lock: {}",
        x_on_0()
    );

    let other = common::runtime();
    let finished = other.block_on(ds.finish_releases(Duration::from_secs(3)));
    let left = x_on_0();
    eprintln!("finish_releases {finished:?}; locker 0 still holds x's grant of y: {left}");
    assert!(
        !left,
        "the failed try_lock's grant on locker 0 is still there after finish_releases ({finished:?}) \
         on another runtime: its undo was spawned on the idle runtime and never sent"
    );
    drop(idle);
}
