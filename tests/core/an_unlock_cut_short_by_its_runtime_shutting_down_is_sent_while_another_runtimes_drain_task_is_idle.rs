//! Reproduces a past break: an unlock cut short by its runtime shutting down was left to a drain task of another runtime that is idle, so a locker answering again kept the entry until it expired.
//!
//! docs/guarantees.md, "Any runtime": "So an acquiring runtime that is idle
//! or gone holds nothing up", and "One thing waits for a runtime that is no
//! longer driven: the safety margin of a lost lock whose loss was declared
//! there, while its holder still holds the guard." An unlock owed by a drop
//! inside a runtime is queued for a drain task on that runtime; one that is
//! shutting down drops that task at once, and the queue is handed to the
//! `Dsync`'s own runtime only when no drain task is left. A drain task of
//! another runtime that queued a failed unlock earlier and is now idle
//! counts as one left: nothing sends the owed unlock while it stays idle.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Timeouts};

const SEED: u64 = 4201;

#[test]
fn an_unlock_cut_short_by_its_runtime_shutting_down_is_sent_while_another_runtimes_drain_task_is_idle(
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let nodes = cluster.nodes();
    let ds = Dsync::builder(cluster.net_lockers())
        .owner("a")
        .rng_seed(SEED)
        .timeouts(Timeouts {
            unlock: Duration::from_millis(200),
            ..Timeouts::default()
        })
        .build()
        .expect("valid coordinator");

    // Runtime `idle`: an unlock of "y" refused by node 2 goes to its retry
    // queue, with a drain task on this runtime, which then stays idle.
    let idle = common::runtime();
    idle.block_on(async {
        let guard = tokio::time::timeout(
            Duration::from_secs(5),
            ds.rw_mutex(["y"]).unwrap().try_lock(),
        )
        .await
        .expect("in time")
        .expect("all three grant");
        nodes[2].set_refuse(true);
        let unlocked = tokio::time::timeout(Duration::from_secs(5), guard.unlock())
            .await
            .expect("the unlock returns in time");
        assert!(unlocked.is_ok(), "two of three confirm: {unlocked:?}");
        // Past the unlock deadline: the refused unlock is queued for retry.
        tokio::time::sleep(Duration::from_millis(600)).await;
    });
    nodes[2].set_refuse(false);

    // Runtime `gone`: "x" is locked and unlocked while node 2 hangs; the
    // unlock returns on the quorum of the other two, and node 2's unlock
    // is still on its way when the runtime shuts down.
    let gone = common::runtime();
    let uid = gone.block_on(async {
        let guard = common::try_lock_x(&ds).await;
        let uid = guard.uid().to_owned();
        nodes[2].set_hang(true);
        let unlocked = tokio::time::timeout(Duration::from_secs(5), guard.unlock())
            .await
            .expect("the unlock returns in time");
        assert!(unlocked.is_ok(), "two of three confirm: {unlocked:?}");
        uid
    });
    drop(gone);
    nodes[2].heal();
    assert!(
        common::holds(&cluster.lockers()[2], &uid),
        "node 2 should still hold x: its unlock never arrived"
    );

    // Node 2 answers again; nothing else happens on any runtime. The
    // `Dsync`'s own runtime should send it the owed unlock within its
    // backoff; 3 s of real time are plenty.
    let watching = common::runtime();
    let left = watching.block_on(async {
        for _ in 0..30 {
            if !common::holds(&cluster.lockers()[2], &uid) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        common::holds(&cluster.lockers()[2], &uid)
    });
    assert!(
        !left,
        "node 2 answers again but still holds x 3 s after the runtime that owed its unlock \
         shut down: the unlock waits for the drain task of an idle runtime"
    );
    drop(idle);
}
