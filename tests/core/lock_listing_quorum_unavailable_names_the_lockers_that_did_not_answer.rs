//! Reproduces a past break: `Dsync::locks()` that too few lockers answered failed with `QuorumUnavailable` naming no locker at all, because the listing's own calls are not noted (they bypass `call_locker`) and the unreachable list is read from failures noted since the listing began.
//!
//! The rustdoc of `Error::QuorumUnavailable` (src/error.rs): "`unreachable`
//! names each locker that did not answer and why". `Dsync::locks()`
//! (src/lock/admin.rs) calls each locker's `locks()` under a bare
//! `clock.timeout_at`, so a listing that fails or times out is never
//! noted, then fills `unreachable` from `Coordinator::unreachable_since(began)`:
//! the failures other calls of the client noted since the listing began.
//! With no other call running, that is nothing.
//!
//! Three lockers, nodes 1 and 2 crashed (their listing fails at once with
//! "the node is down"). The client lists the locks: one of three answers,
//! and the error names no locker. A second case: nodes 1 and 2 hang (a
//! wrapper whose listing never answers); the listing gives up at its
//! deadline (`Timeouts::unlock`, 300 ms here), again naming none.
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::Duration;

use crate::common::hooked::{Call, Hooked, Optional};
use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Error, LocalLocker, NetLocker, Timeouts};
use tokio::time::Instant;

const SEED: u64 = 7_393;

fn named(result: &Result<Vec<quorum_lock::ClusterLock>, Error>) -> Option<(usize, Vec<String>)> {
    match result {
        Err(Error::QuorumUnavailable {
            answered,
            unreachable,
            ..
        }) => Some((
            *answered,
            unreachable.iter().map(|u| u.endpoint.clone()).collect(),
        )),
        _ => None,
    }
}

#[tokio::test(start_paused = true)]
async fn lock_listing_with_crashed_lockers_names_them() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let ds = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(SEED)
        .build()
        .unwrap();
    let _held = ds.rw_mutex(["x"]).unwrap().lock().await.unwrap();
    cluster.crash(&[1, 2]).unwrap();
    let result = tokio::time::timeout(Duration::from_secs(5), ds.locks())
        .await
        .expect("the listing ends");
    eprintln!("locks(): {result:?}");
    let (answered, names) = named(&result).expect("one locker of three answered");
    assert_eq!(answered, 1, "node 0 answered the listing");
    assert_eq!(
        names.len(),
        2,
        "nodes 1 and 2 did not answer the listing, yet it names {names:?}"
    );
}

/// A locker whose listing never answers; it forwards its other calls to
/// `inner`.
fn silent_listing(inner: Arc<LocalLocker>, name: String) -> Arc<dyn NetLocker> {
    Hooked::new(inner)
        .cut_while(|call, _| call == Call::Locks)
        .lacking(&[
            Optional::RefreshMode,
            Optional::LockWait,
            Optional::Queues,
            Optional::Fence,
            Optional::Proclaim,
            Optional::Leader,
        ])
        .named(name)
        .online(true)
        .local(false)
        .shared()
}

#[tokio::test(start_paused = true)]
async fn lock_listing_with_silent_lockers_names_them() {
    eprintln!("seed {SEED}");
    let lockers: Vec<Arc<dyn NetLocker>> = (0..3)
        .map(|i| -> Arc<dyn NetLocker> {
            let inner = Arc::new(LocalLocker::new());
            if i == 0 {
                inner
            } else {
                silent_listing(inner, format!("node-{i}"))
            }
        })
        .collect();
    let ds = Dsync::builder(lockers)
        .owner("h")
        .rng_seed(SEED)
        .timeouts(Timeouts {
            unlock: Duration::from_millis(300),
            ..Timeouts::default()
        })
        .build()
        .unwrap();
    let start = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(5), ds.locks())
        .await
        .expect("the listing ends at its deadline");
    eprintln!("locks() at {:?}: {result:?}", start.elapsed());
    let (answered, names) = named(&result).expect("one locker of three answered");
    assert_eq!(answered, 1, "node 0 answered the listing");
    assert_eq!(
        names.len(),
        2,
        "nodes 1 and 2 left the listing unanswered to its deadline, yet it names {names:?}"
    );
}
