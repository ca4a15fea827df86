//! Unit tests of a holder's table: it keeps a slot only while the lock is
//! held or being acquired.

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::SeedableRng;

use super::Holder;
use crate::lock::coordinator::Coordinator;
use crate::lock::keeper::Keeper;
use crate::{DRWMutex, Error, Lease, LocalLocker, NetLocker, RetryPolicy, Timeouts, Waiting};

/// Three in-process lockers, without the `Dsync` above this module.
struct Cluster {
    coord: Arc<Coordinator>,
    keeper: Arc<Keeper>,
}

impl Cluster {
    fn new() -> Self {
        let lockers = (0..3)
            .map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>)
            .collect();
        let coord = Coordinator::new(
            lockers,
            "holder-tests".into(),
            Timeouts::default(),
            RetryPolicy::default(),
            Lease::default(),
            Waiting::default(),
            SmallRng::seed_from_u64(3),
        );
        Cluster {
            coord: Arc::new(coord),
            keeper: Arc::default(),
        }
    }

    fn holder(&self) -> Holder {
        Holder::new(self.coord.clone())
    }

    fn rw_mutex(&self, name: &str) -> DRWMutex {
        DRWMutex::new(
            self.coord.clone(),
            self.keeper.clone(),
            vec![name.to_owned()].into(),
            "tests".into(),
        )
    }
}

#[tokio::test(start_paused = true)]
async fn slots_go_with_the_last_hold() {
    let ds = Cluster::new();
    let holder = ds.holder();
    let mutex = ds.rw_mutex("a");
    let outer = holder.lock(&mutex).await.expect("granted");
    let inner = holder.read(&mutex).await.expect("nested");
    assert_eq!(holder.shared.slot_count(), 1);
    drop(outer);
    assert_eq!(holder.shared.slot_count(), 1);
    inner.unlock().await.expect("released");
    assert_eq!(holder.shared.slot_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn failed_and_abandoned_acquires_leave_no_slot() {
    let ds = Cluster::new();
    let mutex = ds.rw_mutex("b");
    let other = ds.holder();
    let guard = other.lock(&mutex).await.expect("granted");

    let holder = ds.holder();
    assert_eq!(holder.try_lock(&mutex).await.err(), Some(Error::WouldBlock));
    assert_eq!(holder.shared.slot_count(), 0);
    let waited = holder.lock_timeout(&mutex, Duration::from_secs(1)).await;
    assert_eq!(waited.err(), Some(Error::Timeout));
    assert_eq!(holder.shared.slot_count(), 0);
    // Dropped while waiting in line.
    let abandoned = tokio::time::timeout(Duration::from_secs(1), holder.read(&mutex)).await;
    assert!(abandoned.is_err());
    assert_eq!(holder.shared.slot_count(), 0);

    // A task waiting for its turn behind another clone keeps the slot.
    let (first, second) = (holder.clone(), holder.clone());
    let (m1, m2) = (mutex.clone(), mutex.clone());
    let a = tokio::spawn(async move { first.lock(&m1).await });
    let b = tokio::spawn(async move { second.lock(&m2).await });
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(holder.shared.slot_count(), 1);
    a.abort();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(holder.shared.slot_count(), 1, "the second still waits");
    b.abort();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(holder.shared.slot_count(), 0);
    guard.unlock().await.expect("released");
}

#[tokio::test(start_paused = true)]
async fn a_refused_upgrade_keeps_the_read_hold() {
    let ds = Cluster::new();
    let holder = ds.holder();
    let mutex = ds.rw_mutex("c");
    let reader = holder.read(&mutex).await.expect("granted");
    assert!(matches!(
        holder.lock(&mutex).await,
        Err(Error::UpgradeNotSupported { .. })
    ));
    assert_eq!((reader.holds(), holder.shared.slot_count()), (1, 1));
    drop(reader);
    assert_eq!(holder.shared.slot_count(), 0);
}
