//! Reproduces a past break: forcing open a lock that expired on every locker counts each as having had it to drop (an expired entry counted as held)
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::{Dsync, ForceUnlocked, LocalLocker, LockArgs, NetLocker};

fn lockers() -> Vec<Arc<LocalLocker>> {
    (0..3)
        .map(|i| {
            // The default validity, 60 s, as `Dsync`'s default lease.
            Arc::new(LocalLocker::named(format!("node-{i}")))
        })
        .collect()
}

fn held(uid: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec!["nightly-job".to_owned()].into(),
        owner: "vanished".into(),
        source: "tests/core".into(),
        quorum: 2,
    }
}

/// A holder took "nightly-job" on every locker and vanished; its entries
/// expired a second ago. Nothing is held on the name any more (another
/// uid would be granted it), so forcing it open removes nothing:
/// `removed_on` is how a caller tells a lock forced open from a name
/// nobody held.
#[tokio::test(start_paused = true)]
async fn forcing_open_by_name_a_lock_that_expired_everywhere_removes_nothing() {
    let nodes = lockers();
    for node in &nodes {
        assert_eq!(node.lock(&held("vanished")).await, Ok(true));
    }
    tokio::time::advance(Duration::from_secs(61)).await;
    let ds = Dsync::new(
        nodes
            .iter()
            .map(|n| n.clone() as Arc<dyn NetLocker>)
            .collect(),
    )
    .unwrap();
    let forced = ds.force_unlock_counted(["nightly-job"]).await.unwrap();
    assert_eq!(
        forced,
        ForceUnlocked {
            confirmed: 3,
            removed_on: 0
        },
        "the lock expired on every locker a second ago, yet forcing it open counts it as removed"
    );
}

/// The same by uid: a locker asked to force open the entries of a uid
/// whose entries all expired has nothing of it to drop, and says so.
#[tokio::test(start_paused = true)]
async fn forcing_open_by_uid_a_lock_that_expired_removes_nothing() {
    let node = &lockers()[0];
    assert_eq!(node.lock(&held("vanished")).await, Ok(true));
    tokio::time::advance(Duration::from_secs(61)).await;
    let by_uid = LockArgs {
        resources: Vec::<String>::new().into(),
        ..held("vanished")
    };
    assert_eq!(
        node.force_unlock(&by_uid).await,
        Ok(false),
        "the uid's only entry expired a second ago, yet forcing it open says an entry was dropped"
    );
}
