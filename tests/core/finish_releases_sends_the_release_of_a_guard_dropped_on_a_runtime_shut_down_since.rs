//! Reproduces a past break: a guard dropped on a runtime that was shut down while its unlock to a silent locker was in flight lost that unlock, and `finish_releases` on another runtime returned `Ok` with the entry still on the locker after it answered again.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": dropping
//! "a guard never leaves an entry behind on a reachable locker: calls
//! still in flight finish in the background"; "A lost lock is freed once
//! its holder lets go": "`Dsync::finish_releases(bound)` waits for these
//! releases, and every other one handed to the background, before a
//! process exits"; "Any runtime": "A runtime that is shut down takes its
//! drain task with it: what that task still held goes back to the queue,
//! for the next drain task on any runtime (the next failed release, or
//! `Dsync::finish_releases`) to send". The `finish_releases` docs
//! (src/lock/dsync.rs) list "guards dropped without `unlock()`" among what
//! it waits for. The drop's release task is not a drain task: when its
//! runtime shuts down with the unlock still in flight (not failed yet),
//! nothing goes back to the queue, the release no longer counts as
//! outstanding, and `finish_releases` reports everything finished while
//! the locker, answering again, holds the released entry until it expires.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::Dsync;

const SEED: u64 = 3662;

/// Three lockers grant "x"; node 2 then stops answering (calls hang). The
/// guard is dropped inside a second runtime, which so sends the release;
/// nodes 0 and 1 take it at once, node 2's unlock hangs (its deadline is
/// the default 5 s). 300 ms later that runtime is shut down. Node 2
/// answers again, and `finish_releases(3 s)` on the test's runtime should
/// leave it without the released uid, or say releases are pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_releases_sends_the_release_of_a_guard_dropped_on_a_runtime_shut_down_since() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let ds = Dsync::builder(cluster.net_lockers())
        .owner("a")
        .rng_seed(SEED)
        .build()
        .expect("valid coordinator");
    let guard = crate::common::try_lock_x(&ds).await;
    let uid = guard.uid().to_owned();
    assert!(
        crate::common::holds(&cluster.lockers()[2], &uid),
        "node 2 granted"
    );

    cluster.set_hang(true, &[2]).unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        tokio::task::spawn_blocking(move || {
            std::thread::spawn(move || {
                let other = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a second runtime");
                other.block_on(async move {
                    drop(guard);
                    tokio::time::sleep(Duration::from_millis(300)).await;
                });
                other.shutdown_timeout(Duration::from_secs(1));
            })
            .join()
            .expect("the second runtime's thread ends")
        }),
    )
    .await
    .expect("the second runtime ends in time")
    .expect("the blocking task ends");
    assert!(
        !crate::common::holds(&cluster.lockers()[0], &uid),
        "node 0 took the release"
    );

    cluster.heal(&[2]).unwrap();
    let finished = ds.finish_releases(Duration::from_secs(3)).await;
    let left = [
        crate::common::holds(&cluster.lockers()[0], &uid),
        crate::common::holds(&cluster.lockers()[1], &uid),
        crate::common::holds(&cluster.lockers()[2], &uid),
    ];
    eprintln!("finish_releases: {finished:?}; nodes holding the uid: {left:?}");
    assert!(
        finished.is_err() || !left.iter().any(|h| *h),
        "finish_releases returned Ok while node 2, answering again, still held the uid of a \
         guard dropped on a runtime shut down since: {left:?}"
    );
    assert!(
        !left.iter().any(|h| *h),
        "the release of a dropped guard was lost with the runtime it ran on, and node 2 kept \
         the entry after it answered again: {left:?}"
    );
}
