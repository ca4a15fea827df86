//! Reproduces a past break: a campaign dropped by the shutdown of the runtime it ran on, while grants of the election's lock were still on their way back, left those grants on lockers that answer until they expired, and `finish_releases` said every release was done.
//!
//! docs/election.md, "Cancel safety": "A cancelled campaign leaves no place
//! in line, grant or value behind: its undo goes out when it is dropped".
//! docs/guarantees.md, "Leader election": "no leaks from a cancelled
//! campaign"; "No leaks from cancellation or failure": "calls still in
//! flight finish in the background and undo any grant they receive".
//! `Dsync::finish_releases` (src/lock/dsync.rs) waits for "the grants and
//! places of abandoned waits (a `lock_timeout` that gave up, a dropped
//! future)".
//!
//! What happens instead: nodes 1 and 2 apply the lock on `election/e` at
//! once but their replies take 3 s (a `Relay` routing `Lock` calls
//! `SlowReply`); node 0 grants at once. The runtime running `campaign` is
//! shut down 200 ms in. The campaign is dropped there: its stragglers (the
//! calls to nodes 1 and 2) are spawned onto the runtime that is shutting
//! down and dropped unrun, and nothing queues an unlock for a call that
//! may have been applied. `finish_releases` on another runtime returns at
//! once; nodes 1 and 2, answering every call, keep the grant until it
//! expires, and the next candidate cannot win until then.
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, NetLocker};

const SEED: u64 = 36_286;

/// Which nodes hold an entry of the election's lock, whatever its uid.
fn holding_lock(cluster: &TestCluster) -> Vec<bool> {
    cluster
        .lockers()
        .iter()
        .map(|node| node.snapshot().iter().any(|e| e.resource == "election/e"))
        .collect()
}

#[test]
fn a_campaign_cut_short_by_its_runtime_shutting_down_leaves_no_grant_behind() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            if i == 0 {
                return l;
            }
            Arc::new(Relay::new(l, |kind, _| {
                if kind == CallKind::Lock {
                    Route::SlowReply(Duration::from_secs(3))
                } else {
                    Route::Forward
                }
            })) as Arc<dyn NetLocker>
        })
        .collect();
    let ds = Dsync::builder(lockers)
        .owner("a")
        .rng_seed(SEED)
        .build()
        .expect("valid coordinator");
    let acquiring = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let election = ds.election("e").unwrap();
    acquiring.block_on(async {
        tokio::spawn(async move {
            let _ = election.campaign(b"a".to_vec()).await;
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
    });
    assert_eq!(
        holding_lock(&cluster),
        [true, true, true],
        "every node applied the lock; two replies are still on their way"
    );
    let shut = Instant::now();
    acquiring.shutdown_timeout(Duration::from_secs(1));
    let finishing = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let finished = finishing.block_on(ds.finish_releases(Duration::from_secs(2)));
    // Bounded: whatever is still running has 2 s more to land.
    let mut left = holding_lock(&cluster);
    while left.iter().any(|h| *h) && shut.elapsed() < Duration::from_secs(4) {
        std::thread::sleep(Duration::from_millis(20));
        left = holding_lock(&cluster);
    }
    let at = shut.elapsed();
    eprintln!("{at:?} after the shutdown: finish_releases {finished:?}, nodes holding election/e {left:?}");
    assert!(
        at < Duration::from_secs(30),
        "checked long before the 60 s validity could expire the entries: {at:?}"
    );
    assert!(
        !left.iter().any(|h| *h),
        "the campaign was dropped (its runtime shut down) and, {at:?} later, nodes that \
         answer every call still hold its grant: {left:?} (finish_releases gave {finished:?})"
    );
}
