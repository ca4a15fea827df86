//! Reproduces a past break: lockers that refused a wait for quarantine, came back without one (restarted again, `--quarantine 0`) and then granted another lock of the same client, still read as "in quarantine for 59s more", and the wait gave up with `Quarantined`.
//!
//! `WaitStatus::quarantined`: "Lockers that refuse grants because they
//! restarted recently"; `Error::Quarantined`: lockers "in quarantine after
//! a restart are what keeps a quorum from granting" (docs/guarantees.md,
//! "Why a wait waits"). A locker that has just granted this client a lock
//! refuses no grant. The fix of 63fc3f0 keeps a quarantine refusal
//! standing "whatever it answered since" for the whole time the locker
//! said was left, so that answered releases and refreshes do not end it;
//! a grant is no such answer, yet it does not end it either.
//!
//! Three lockers; nodes 0 and 1 restarted (in quarantine for 60 s), node 2
//! fresh. A wait on "job" with a 1 s deadline is refused by nodes 0 and 1
//! for quarantine, again at each retry. At 999 ms nodes 0 and 1 are
//! restarted once more, as servers that keep no quarantine (a stand-in
//! that swaps the table behind each endpoint,
//! `swapped_server_support::Swap`), and a `try_lock` on "x"
//! through the same client is granted by all three. The wait on "job"
//! still lists nodes 0 and 1 as in quarantine for 59 s more, and gives up
//! with `Error::Quarantined` (exit 69, "in quarantine for 59s more") while
//! those lockers grant.
#![cfg(feature = "testing")]

use crate::common;
use std::sync::Arc;
use std::time::Duration;

use crate::swapped_server_support::Swap;
use quorum_lock::{Dsync, Error, LocalLocker, LockerConfig, NetLocker};
use tokio::time::sleep;

const SEED: u64 = 3677;

#[tokio::test(start_paused = true)]
async fn lockers_back_without_quarantine_that_granted_a_lock_no_longer_read_as_in_quarantine() {
    eprintln!("seed {SEED}");
    let quarantined = |name: &str| {
        let table = LocalLocker::with_config(name, LockerConfig::default());
        table.restart();
        Arc::new(Swap::new(name, table))
    };
    let nodes = [quarantined("node-0"), quarantined("node-1")];
    let lockers: Vec<Arc<dyn NetLocker>> = vec![
        nodes[0].clone(),
        nodes[1].clone(),
        Arc::new(LocalLocker::named("node-2")),
    ];
    let client = Dsync::builder(lockers)
        .owner("h")
        .rng_seed(SEED)
        .build()
        .unwrap();
    let mutex = client.rw_mutex(["job"]).unwrap();
    let wait = common::spawn_lock_timeout(&mutex, Duration::from_secs(1));
    sleep(Duration::from_millis(999)).await;
    let before = mutex.waiting().expect("the wait runs");
    eprintln!("waiting at 999ms: {before}");
    assert_eq!(before.quarantined.len(), 2, "{before}");
    // Both come back as servers that keep no quarantine.
    let no_quarantine = LockerConfig {
        quarantine: Duration::ZERO,
        ..LockerConfig::default()
    };
    for (i, node) in nodes.iter().enumerate() {
        node.replace(LocalLocker::with_config(format!("node-{i}"), no_quarantine));
    }
    let other = client.rw_mutex(["x"]).unwrap();
    let granted = other.try_lock().await;
    eprintln!("try_lock on x: {:?}", granted.as_ref().map(|_| "granted"));
    assert!(granted.is_ok(), "nodes 0, 1 and 2 grant x");
    drop(granted);
    tokio::task::yield_now().await;
    let status = mutex.waiting().expect("the wait runs");
    eprintln!("waiting at 999ms, after x was granted: {status} ({status:?})");
    let result = common::ended(wait).await;
    eprintln!("gave up with: {result:?}");
    assert!(
        status.quarantined.is_empty(),
        "nodes 0 and 1 just granted x, yet read as in quarantine: {status}"
    );
    assert!(
        !matches!(result, Err(Error::Quarantined { .. })),
        "nodes 0 and 1 just granted x, yet the wait failed with {result:?}"
    );
}
