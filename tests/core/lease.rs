//! Refresh, expiry and loss signalling with healthy in-process lockers.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::{Dsync, Error, Lease, LocalLocker, NetLocker};
use tokio::time::Instant;

fn cluster(n: usize) -> (Dsync, Vec<Arc<LocalLocker>>) {
    let nodes: Vec<Arc<LocalLocker>> = (0..n).map(|_| Arc::new(LocalLocker::new())).collect();
    let ds = Dsync::builder(
        nodes
            .iter()
            .map(|l| l.clone() as Arc<dyn NetLocker>)
            .collect(),
    )
    .rng_seed(1)
    .build()
    .expect("valid settings");
    (ds, nodes)
}

#[tokio::test(start_paused = true)]
async fn refresh_keeps_a_lock_alive_far_past_the_validity() {
    let (ds, nodes) = cluster(5);
    let guard = ds.rw_mutex(["a"]).unwrap().lock().await.unwrap();
    let reader = ds.rw_mutex(["b"]).unwrap().read().await.unwrap();
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert!(!guard.is_lost() && !reader.is_lost());
    assert!(matches!(
        ds.rw_mutex(["a"]).unwrap().try_lock().await,
        Err(Error::WouldBlock)
    ));
    assert!(matches!(
        ds.rw_mutex(["b"]).unwrap().try_lock().await,
        Err(Error::WouldBlock)
    ));
    for node in &nodes {
        for entry in node.snapshot() {
            assert!(
                entry.refreshed.elapsed() <= Duration::from_secs(10),
                "{entry:?} not refreshed"
            );
        }
    }
    guard.unlock().await.unwrap();
    reader.unlock().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_forced_unlock_is_signalled_at_the_next_refresh() {
    let (ds, _nodes) = cluster(3);
    let guard = ds.rw_mutex(["job"]).unwrap().lock().await.unwrap();
    let token = guard.loss_token();
    let lost = guard.lost();
    let start = Instant::now();
    assert_eq!(ds.force_unlock(["job"]).await.unwrap(), 3);
    lost.await;
    assert!(guard.is_lost() && token.is_cancelled());
    assert!(
        start.elapsed() <= Duration::from_secs(10),
        "noticed after {:?}",
        start.elapsed()
    );
    // The caller learns that its critical section was not protected to the end.
    assert_eq!(guard.unlock().await, Err(Error::LockLost));
}

#[tokio::test(start_paused = true)]
async fn cancelling_the_loss_token_does_not_mark_the_lock_lost() {
    let (ds, _nodes) = cluster(3);
    let guard = ds.rw_mutex(["job"]).unwrap().lock().await.unwrap();
    guard.loss_token().cancel();
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn listing_merges_entries_across_lockers() {
    let (ds, nodes) = cluster(5);
    let w = ds.rw_mutex(["a", "b"]).unwrap().lock().await.unwrap();
    let r1 = ds.rw_mutex(["c"]).unwrap().read().await.unwrap();
    let r2 = ds.rw_mutex(["c"]).unwrap().read().await.unwrap();
    // A stale entry on one node only, as left by a crashed holder.
    let stale = quorum_lock::LockArgs {
        uid: "stale".into(),
        resources: vec!["z".to_string()].into(),
        owner: "gone".into(),
        source: "test".into(),
        quorum: 3,
    };
    assert!(nodes[0].lock(&stale).await.unwrap());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let locks = ds.locks().await.unwrap();
    let summary: Vec<(&str, usize)> = locks
        .iter()
        .map(|l| (l.resource.as_str(), l.nodes))
        .collect();
    assert_eq!(summary, [("a", 5), ("b", 5), ("c", 5), ("c", 5), ("z", 1)]);
    assert!(locks.iter().all(|l| l.age >= Duration::from_secs(3)));
    assert_eq!(locks[0].uid, w.uid());
    w.unlock().await.unwrap();
    r1.unlock().await.unwrap();
    r2.unlock().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn bad_lease_settings_are_rejected() {
    let nodes: Vec<Arc<dyn NetLocker>> = vec![Arc::new(LocalLocker::new())];
    let too_slow = Lease {
        refresh_interval: Duration::from_secs(55),
        ..Lease::default()
    };
    let no_margin = Lease {
        safety_margin: Duration::from_secs(60),
        ..Lease::default()
    };
    for lease in [too_slow, no_margin] {
        let built = Dsync::builder(nodes.clone()).lease(lease).build();
        assert!(matches!(built, Err(Error::InvalidArgument(_))), "{lease:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_keeper_stops_when_the_coordinator_is_gone() {
    let (ds, nodes) = cluster(3);
    let guard = ds.rw_mutex(["a"]).unwrap().lock().await.unwrap();
    guard.unlock().await.unwrap();
    let weak = Arc::downgrade(&nodes[0]);
    drop(ds);
    drop(nodes);
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The keeper task held the lockers through the coordinator; both are gone.
    assert!(
        weak.upgrade().is_none(),
        "the keeper task leaked the coordinator"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_tight_lock_loop_does_not_starve_other_tasks() {
    // In-process acquires never return Pending; without a coop budget the
    // loop below would never let the spawned task (or the keeper) run.
    let (ds, _nodes) = cluster(5);
    let mutex = ds.rw_mutex(["hot"]).unwrap();
    let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = ran.clone();
    tokio::spawn(async move { flag.store(true, std::sync::atomic::Ordering::SeqCst) });
    for _ in 0..1_000 {
        let guard = mutex.lock().await.unwrap();
        guard.unlock().await.unwrap();
        if ran.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
    }
    panic!("1,000 lock/unlock cycles never yielded to another task");
}
