//! Reproduces a past break: with every unlock landed and every locker answering, `finish_releases` waited out its bound and failed with `ReleasesPending`, held up by the drain task of a runtime left idle that had nothing left to send.
//!
//! `Dsync::finish_releases` (src/lock/dsync.rs): "Fails with
//! [`Error::ReleasesPending`] when releases are still running at the bound
//! (a lock server is unreachable, say)". docs/guarantees.md, "Any runtime":
//! "So an acquiring runtime that is idle or gone holds nothing up", and
//! "One thing waits for a runtime that is no longer driven: the safety
//! margin of a lost lock whose loss was declared there, while its holder
//! still holds the guard."
//!
//! The scene: on runtime `idle`, "y" is taken and unlocked while locker 2
//! refuses; its unlock is queued for retry, with a drain task on `idle`,
//! which is then no longer driven. Locker 2 answers again. Another runtime
//! calls `finish_releases`: its own drain task sends the unlock, which
//! lands, and nothing else is owed; but the idle runtime's drain task is
//! still counted among the releases running, and never runs again.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::Timeouts;

const SEED: u64 = 4302;

#[test]
fn finish_releases_is_not_held_up_by_the_drain_task_of_an_idle_runtime_once_every_unlock_landed() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let nodes = cluster.nodes();
    let ds = common::with_timeouts(
        cluster.net_lockers(),
        SEED,
        Timeouts {
            unlock: Duration::from_millis(200),
            ..Timeouts::default()
        },
    );

    let idle = common::runtime();
    let uid = idle.block_on(async {
        let guard = common::try_lock(&ds, "y").await;
        let uid = guard.uid().to_owned();
        nodes[2].set_refuse(true);
        let unlocked = tokio::time::timeout(Duration::from_secs(5), guard.unlock())
            .await
            .expect("the unlock returns in time");
        assert!(unlocked.is_ok(), "two of three confirm: {unlocked:?}");
        // Past the unlock deadline: the refused unlock is queued for retry.
        tokio::time::sleep(Duration::from_millis(600)).await;
        uid
    });
    assert!(
        common::holds(&cluster.lockers()[2], &uid),
        "locker 2 refused the unlock and still holds y"
    );
    nodes[2].set_refuse(false);

    let (finished, left) =
        common::finish_elsewhere(&ds, cluster.lockers(), &uid, Duration::from_secs(2));
    assert!(
        !left.iter().any(|h| *h),
        "locker 2 answers again and finish_releases' drain task should have sent it the unlock: \
         {left:?}"
    );
    assert!(
        finished.is_ok(),
        "every unlock landed and every locker answers, yet finish_releases gave {finished:?}: \
         the drain task of the idle runtime, with nothing left to send, held it up"
    );
    drop(idle);
}
