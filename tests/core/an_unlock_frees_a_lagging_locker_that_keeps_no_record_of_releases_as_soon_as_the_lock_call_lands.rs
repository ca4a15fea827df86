//! A lock won by a quorum while one locker's call was still on its way
//! (a lagging node) is freed there as soon as that call lands, when the
//! locker keeps no record of releases (as a Redis node): the release sends
//! it an unlock at once, behind the call. A locker that keeps such a
//! record (`LocalLocker`, a lock server) is sent none: its entry stays
//! until the call's answer comes back and the call undoes its grant, so
//! that the record's window starts no earlier than it did.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use quorum_lock::{Dsync, Error, LockArgs, NetLocker};
use tokio::time::sleep;

use crate::common::*;

/// How late locker 2 answers (it applies each call at once).
const LAG: Duration = Duration::from_millis(500);

/// A locker that says it keeps no record of releases, over one that does:
/// what the coordinator sends it is what a Redis node would get.
struct Forgetful(Arc<FaultyLocker>);

#[async_trait]
impl NetLocker for Forgetful {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.0.lock(args).await
    }
    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.0.rlock(args).await
    }
    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.0.unlock(args).await
    }
    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.0.runlock(args).await
    }
    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        self.0.refresh(args).await
    }
    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.0.force_unlock(args).await
    }
    fn endpoint(&self) -> String {
        self.0.endpoint()
    }
    fn is_online(&self) -> bool {
        self.0.is_online()
    }
    fn is_local(&self) -> bool {
        self.0.is_local()
    }
    fn remembers_releases(&self) -> bool {
        false
    }
}

/// Takes and releases `name` in `mode` (unlocked, or the guard dropped)
/// while locker 2 lags; returns whether locker 2 still held an entry 1 ms
/// after the release, its lock call's answer 499 ms away.
async fn held_on_the_lagging_locker_after_release(
    ds: &Dsync,
    nodes: &[Arc<quorum_lock::LocalLocker>],
    name: &str,
    write: bool,
    dropped: bool,
) -> bool {
    let m = ds.rw_mutex([name]).unwrap();
    let held_on_2 = || !nodes[2].snapshot().is_empty();
    if write {
        let guard = m.lock().await.unwrap();
        assert!(held_on_2(), "{name}: the lagging locker applied the lock");
        if dropped {
            drop(guard);
        } else {
            guard.unlock().await.unwrap();
        }
    } else {
        let guard = m.read().await.unwrap();
        assert!(held_on_2(), "{name}: the lagging locker applied the lock");
        if dropped {
            drop(guard);
        } else {
            guard.unlock().await.unwrap();
        }
    }
    sleep(Duration::from_millis(1)).await;
    held_on_2()
}

#[tokio::test(start_paused = true)]
async fn an_unlock_frees_a_lagging_locker_that_keeps_no_record_of_releases_as_soon_as_the_lock_call_lands(
) {
    for forgetful in [true, false] {
        let nodes = nodes(3);
        let faults: Vec<_> = nodes
            .iter()
            .map(|n| FaultyLocker::wrap(n.clone()))
            .collect();
        let lockers: Vec<Arc<dyn NetLocker>> = if forgetful {
            faults
                .iter()
                .map(|f| Arc::new(Forgetful(f.clone())) as Arc<dyn NetLocker>)
                .collect()
        } else {
            as_lockers(&faults)
        };
        let ds = client(lockers, 7);
        faults[2].set(Behaviour::SlowReply(LAG));
        for (name, write, dropped) in [
            ("write-unlocked", true, false),
            ("read-unlocked", false, false),
            ("write-dropped", true, true),
            ("read-dropped", false, true),
        ] {
            let held =
                held_on_the_lagging_locker_after_release(&ds, &nodes, name, write, dropped).await;
            let context = format!("{name}, keeps a record of releases: {}", !forgetful);
            assert_eq!(
                held, !forgetful,
                "{context}: the lagging locker's entry 1 ms after the release"
            );
            // The call's answer comes back later and is undone: nothing
            // left either way.
            assert_no_leaks(&nodes, &context).await;
        }
    }
}
