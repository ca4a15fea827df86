//! docs/operating.md, "Rolling restarts": one server at a time, "holders
//! keep their locks throughout"; docs/safety.md rule 2: a restarted locker
//! re-creates a holder's entry from its refresh, except for a uid it
//! released or a name it was forced to open during the quarantine (a
//! refresh sent *before* that release may arrive after it). A lock taken
//! *after* the name was forced open was not sent before the force: its
//! holder is live and must get its entry back.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use tokio::time::sleep;

/// Three lockers. A holder vanishes without unlocking "job"; node 2
/// restarts; the admin forces "job" open (the documented way to clear a
/// stuck lock); a new holder takes "job" on nodes 0 and 1. Once node 2 is
/// out of quarantine, node 1 restarts.
#[tokio::test(start_paused = true)]
async fn a_lock_taken_after_its_name_was_forced_open_survives_a_rolling_restart() {
    let cluster = TestCluster::new(3, 43);
    let stuck_client = common::seeded(cluster.net_lockers(), "vanished", 43);
    let stuck = stuck_client
        .rw_mutex(["job"])
        .unwrap()
        .lock()
        .await
        .unwrap();
    std::mem::forget(stuck);

    cluster.restart(&[2]).unwrap();
    let admin = common::seeded(cluster.net_lockers(), "admin", 44);
    let forced = admin.force_unlock(["job"]).await.unwrap();
    assert!(forced >= 2, "force_unlock confirmed on {forced}");

    let ds = common::seeded(cluster.net_lockers(), "holder", 45);
    let guard = ds.rw_mutex(["job"]).unwrap().lock().await.unwrap();

    let node2 = cluster.lockers()[2].clone();
    sleep(Duration::from_secs(62)).await;
    assert!(!node2.is_quarantined());
    let on_node2 = node2.snapshot().iter().any(|l| l.resource == "job");

    cluster.restart(&[1]).unwrap();
    sleep(Duration::from_secs(65)).await;
    assert!(
        !guard.is_lost(),
        "a holder that took the lock after it was forced open lost it in a rolling restart, one \
         server at a time (its entry re-created on node 2 during node 2's quarantine: {on_node2})"
    );
}
