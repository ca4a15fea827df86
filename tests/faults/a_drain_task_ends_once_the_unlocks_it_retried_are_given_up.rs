//! Reproduces a past break: a drain task whose queue holds nothing it may send (its unlocks given up as expired) records an empty batch in flight at each step, which keeps it looping every backoff step for ever.
//!
//! src/lock/unlock_queue.rs: a drain task ends once its queue is empty and
//! no batch is on its way; docs/guarantees.md, "Any runtime": a drain task
//! on a runtime is there to send what it queued, and the queue probes a
//! failing locker "with one unlock per backoff step". A drain task that
//! took an empty batch (everything left was expired, or a lost lock's
//! clean-up still waiting for its holder) records it in `in_flight` and
//! `continue`s without finishing it; the record keeps the queue looking
//! busy, the next step records another, and the task never ends: it wakes
//! every backoff step (10 ms or more) as long as the runtime lives.
//!
//! The scene (paused time): one locker of three refuses; an unlock to it
//! fails, is queued, and is retried until its retry window
//! (`Timeouts::release_retry`, 2 s) ends. Minutes later, the runtime still
//! has the drain task alive.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Timeouts};

const SEED: u64 = 4501;

#[tokio::test(start_paused = true)]
async fn a_drain_task_ends_once_the_unlocks_it_retried_are_given_up() {
    eprintln!("seed {SEED}");
    let metrics = tokio::runtime::Handle::current().metrics();
    let cluster = TestCluster::new(3, SEED);
    let ds = Dsync::builder(cluster.net_lockers())
        .owner("a")
        .rng_seed(SEED)
        .timeouts(Timeouts {
            unlock: Duration::from_millis(500),
            release_retry: Duration::from_secs(2),
            ..Timeouts::default()
        })
        .build()
        .expect("valid coordinator");
    let mutex = ds.rw_mutex(["q"]).expect("valid name");

    // The same lock taken and released once with every locker answering:
    // whatever the library keeps running after that is the baseline.
    let guard = tokio::time::timeout(Duration::from_secs(5), mutex.try_lock())
        .await
        .expect("in time")
        .expect("all three grant");
    tokio::time::timeout(Duration::from_secs(5), guard.unlock())
        .await
        .expect("in time")
        .expect("all three confirm");
    tokio::time::sleep(Duration::from_secs(120)).await;
    let baseline = metrics.num_alive_tasks();

    let guard = tokio::time::timeout(Duration::from_secs(5), mutex.try_lock())
        .await
        .expect("in time")
        .expect("all three grant");
    cluster.set_refuse(true, &[0]).expect("valid node");
    tokio::time::timeout(Duration::from_secs(5), guard.unlock())
        .await
        .expect("in time")
        .expect("two of three confirm");
    // The unlock to node 0 is queued and retried until its window ends.
    tokio::time::sleep(Duration::from_secs(120)).await;
    let finished = ds.finish_releases(Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_secs(120)).await;
    let alive = metrics.num_alive_tasks();
    eprintln!("tasks alive: {baseline} after a clean release, {alive} after the given-up retries; finish_releases {finished:?}");
    assert!(
        alive <= baseline,
        "four minutes after the queued unlock was given up ({finished:?}), {alive} tasks are \
         alive against {baseline} after a clean release: the drain task keeps recording empty \
         batches in flight and never ends"
    );
}
