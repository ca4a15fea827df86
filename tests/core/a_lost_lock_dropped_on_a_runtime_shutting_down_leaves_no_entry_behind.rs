//! Reproduces a past break: a lost lock whose guard was dropped on a runtime that then shut down kept its entry on a locker that answers until it expired, and `finish_releases` said every release was done.
//!
//! docs/guarantees.md, "A lost lock is freed once its holder lets go": "As
//! soon as the holder drops its guard ..., they go at once instead", and
//! "`Dsync::finish_releases(bound)` waits for these releases". "Any
//! runtime": "Every unlock is owed from the moment its release is planned:
//! a release task that a runtime shut down drops unrun or cuts short
//! queues what it had not done, and so does a lost lock's clean-up (sent
//! once the safety margin has passed or its holder let go, as the task
//! would have)." "No leaks from cancellation or failure": dropping a guard
//! "never leaves an entry behind on a reachable locker".
//!
//! What happens instead: "x" is taken on runtime X, lockers 0 and 1 are
//! forced open so X's refresh declares the loss; locker 2 still holds the
//! entry. The guard is dropped on X, which then shuts down. The drop claims
//! the clean-up (`LossSignal::claim_cleanup` in `clean_up_after_holder`,
//! src/lock/refresh.rs), so the declaring task will not do it, and spawns
//! the force-unlock on X, where the shutdown drops it unrun. Nothing is
//! owed for it: nothing is queued, `finish_releases` on a new runtime
//! returns `Ok` at once, and locker 2, answering all along, keeps the entry
//! until it expires.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use futures::executor::block_on;
use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Lease, LockArgs, LockerConfig, NetLocker};

const SEED: u64 = 36_292;

async fn holding(cluster: &TestCluster, uid: &str) -> Vec<bool> {
    let mut left = Vec::new();
    for locker in cluster.lockers() {
        let held = NetLocker::locks(&**locker)
            .await
            .expect("a local listing")
            .iter()
            .any(|l| l.uid == uid);
        left.push(held);
    }
    left
}

#[test]
fn a_lost_lock_dropped_on_a_runtime_shutting_down_leaves_no_entry_behind() {
    eprintln!("seed {SEED}");
    let validity = Duration::from_secs(6);
    let cluster = TestCluster::with_config(
        3,
        SEED,
        LockerConfig {
            validity,
            ..LockerConfig::default()
        },
    );
    let ds = Dsync::builder(cluster.net_lockers())
        .owner("a")
        .rng_seed(SEED)
        .lease(Lease {
            validity,
            safety_margin: Duration::from_secs(2),
            refresh_interval: Duration::from_millis(100),
        })
        .build()
        .expect("valid coordinator");
    let x = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let uid = x.block_on(async {
        let guard = crate::common::try_lock_x(&ds).await;
        let forced = LockArgs {
            uid: "".into(),
            resources: vec!["x".to_string()].into(),
            owner: "admin".into(),
            source: "test".into(),
            quorum: 1,
        };
        for locker in &cluster.lockers()[..2] {
            let forced = NetLocker::force_unlock(&**locker, &forced)
                .await
                .expect("a local force-unlock");
            assert!(forced, "the entry was forced open");
        }
        tokio::time::timeout(Duration::from_secs(2), guard.lost())
            .await
            .expect("the loss is declared within a few refreshes");
        let uid = guard.uid().to_owned();
        assert_eq!(
            holding(&cluster, &uid).await,
            [false, false, true],
            "locker 2 still holds the lost lock's entry"
        );
        // The holder lets go; the runtime ends right after.
        drop(guard);
        uid
    });
    x.shutdown_timeout(Duration::from_secs(1));
    let shut = Instant::now();
    let finishing = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let finished = finishing.block_on(ds.finish_releases(Duration::from_secs(2)));
    let mut left = block_on(holding(&cluster, &uid));
    while left.iter().any(|h| *h) && shut.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(20));
        left = block_on(holding(&cluster, &uid));
    }
    let at = shut.elapsed();
    eprintln!("{at:?} after the runtime ended: finish_releases {finished:?}, lockers holding the uid {left:?}");
    assert!(
        at < Duration::from_millis(4500),
        "checked before the lockers could expire the entry: {at:?}"
    );
    assert!(
        !left.iter().any(|h| *h),
        "the holder dropped its lost guard and, {at:?} later, a locker that answers still holds \
         the entry: {left:?} (finish_releases gave {finished:?})"
    );
}
