//! docs/operating.md, "Rolling restarts": restart the servers one at a
//! time, each once the previous one is out of quarantine, and "holders keep
//! their locks throughout". A restarted locker re-creates a holder's entry
//! from its refresh, unless the uids released there during the quarantine
//! filled what it remembers of them (8 MiB); then it re-creates nothing.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::{LockArgs, NetLocker};
use tokio::time::sleep;

/// Three lockers; a holder keeps "held" throughout. Node 2 restarts, and
/// while it is in quarantine other clients release 90,000 locks of their
/// own there (UUID-sized uids; a busy service, or one client with the
/// ordinary token). Once node 2 is out of quarantine, node 1 restarts.
#[tokio::test(start_paused = true)]
async fn a_holder_keeps_its_lock_through_a_rolling_restart_while_other_locks_are_released() {
    let cluster = TestCluster::new(3, 41);
    let ds = common::seeded(cluster.net_lockers(), "holder", 41);
    let guard = ds.rw_mutex(["held"]).unwrap().lock().await.unwrap();

    cluster.restart(&[2]).unwrap();
    let node2 = cluster.lockers()[2].clone();
    for i in 0..90_000u32 {
        let args = LockArgs {
            uid: format!("00000000-0000-4000-8000-{i:012}").into(),
            resources: vec![format!("job/{i}")].into(),
            owner: "others".into(),
            source: "tests/core/rolling_restarts_under_release_traffic.rs".into(),
            quorum: 2,
        };
        // Their locks were taken before the restart; the release reaches
        // node 2 as it reaches every locker.
        let _ = NetLocker::unlock(&*node2, &args).await;
    }
    sleep(Duration::from_secs(62)).await;
    assert!(!node2.is_quarantined());
    let on_node2 = node2.snapshot().iter().any(|l| l.resource == "held");

    cluster.restart(&[1]).unwrap();
    sleep(Duration::from_secs(65)).await;
    assert!(
        !guard.is_lost(),
        "the holder lost its lock in a rolling restart, one server at a time (its entry was \
         re-created on node 2 during node 2's quarantine: {on_node2})"
    );
}
