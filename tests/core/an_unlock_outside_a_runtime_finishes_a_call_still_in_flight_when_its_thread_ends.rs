//! Reproduces a past break: an unlock polled outside any runtime returned once a quorum confirmed, and its private runtime ended while the unlock to a silent locker was still in flight, so that call was dropped without reaching the retry queue and the locker kept the entry after it answered again.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": dropping
//! "an `unlock()` future or a guard never leaves an entry behind on a
//! reachable locker: calls still in flight finish in the background", and
//! "An unlock that fails goes to its locker's retry queue ... So a locker
//! that answers again within the validity is cleaned up". "Any runtime":
//! releases run "on a private one for `unlock()` outside any runtime, whose
//! thread stays until the unlocks it queued have landed or stopped
//! mattering". The private thread lingers `min(Timeouts::unlock, 5 s)`
//! after the unlock returns, then waits only for drain tasks of its
//! runtime. An unlock call still in flight at that moment (its deadline is
//! `Timeouts::unlock`, here 8 s) has not failed yet, so nothing is queued:
//! the thread ends, the runtime drops the call, and the locker that answers
//! again a moment later keeps the released entry until it expires. The
//! second test shows the same with the default timeouts: the first unlock
//! to the locker fails at once, and its quick retry (10 ms later) is the
//! call in flight when the thread ends 5 s after the unlock returned.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, NetLocker, Timeouts};

const SEED: u64 = 3661;

/// Three lockers grant "x"; node 2 then stops answering (calls hang). The
/// holder unlocks from a plain thread: nodes 0 and 1 confirm at once, and
/// node 2's unlock is in flight until its 8 s deadline. Node 2 answers
/// again 6 s after the unlock returned, within the 60 s validity and while
/// the acquiring runtime runs; 4 s later it should hold nothing of the
/// released uid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_outside_a_runtime_finishes_a_call_still_in_flight_when_its_thread_ends() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let ds = Dsync::builder(cluster.net_lockers())
        .owner("a")
        .rng_seed(SEED)
        .timeouts(Timeouts {
            unlock: Duration::from_secs(8),
            ..Timeouts::default()
        })
        .build()
        .expect("valid coordinator");
    let guard = crate::common::try_lock_x(&ds).await;
    let uid = guard.uid().to_owned();
    assert!(
        crate::common::holds(&cluster.lockers()[2], &uid),
        "node 2 granted"
    );

    cluster.set_hang(true, &[2]).unwrap();
    let unlocked = crate::common::unlock_on_a_plain_thread(guard).await;
    unlocked.expect("nodes 0 and 1 confirm the unlock");

    tokio::time::sleep(Duration::from_secs(6)).await;
    cluster.heal(&[2]).unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let left = [
        crate::common::holds(&cluster.lockers()[0], &uid),
        crate::common::holds(&cluster.lockers()[1], &uid),
        crate::common::holds(&cluster.lockers()[2], &uid),
    ];
    eprintln!("4 s after node 2 answered again, nodes holding the uid: {left:?}");
    assert!(
        !left.iter().any(|h| *h),
        "an unlock made outside a runtime dropped its call to a silent locker with its private \
         runtime, and the locker kept the released uid's entry after it answered again: {left:?}"
    );
}

/// As above with the default `Timeouts` (unlock 5 s, so the private thread
/// lingers 5 s): node 2's first unlock fails at once (a connection reset),
/// and from then on node 2 hangs, so the unlock's quick retry, sent about
/// 10 ms later with its own 5 s deadline, is still in flight when the
/// thread ends. Node 2 answers again 6 s after the unlock returned; 10 s
/// later it should hold nothing of the released uid (a probe of the retry
/// queue sent while it hung waits out its own 5 s deadline first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_outside_a_runtime_finishes_its_retry_still_in_flight_when_its_thread_ends() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let unlocks = Arc::new(AtomicUsize::new(0));
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| match i {
            2 => {
                let node = cluster.nodes()[2].clone();
                let counted = unlocks.clone();
                Arc::new(Relay::new(l, move |kind, _| {
                    if kind == CallKind::Unlock && counted.fetch_add(1, Ordering::SeqCst) == 0 {
                        node.set_hang(true);
                        Route::Lost("connection reset by peer (test)".into())
                    } else {
                        Route::Forward
                    }
                })) as Arc<dyn NetLocker>
            }
            _ => l,
        })
        .collect();
    let ds = Dsync::builder(lockers)
        .owner("a")
        .rng_seed(SEED)
        .build()
        .expect("valid coordinator");
    let guard = crate::common::try_lock_x(&ds).await;
    let uid = guard.uid().to_owned();
    assert!(
        crate::common::holds(&cluster.lockers()[2], &uid),
        "node 2 granted"
    );

    let unlocked = crate::common::unlock_on_a_plain_thread(guard).await;
    unlocked.expect("nodes 0 and 1 confirm the unlock");

    tokio::time::sleep(Duration::from_secs(6)).await;
    let sent = unlocks.load(Ordering::SeqCst);
    assert!(sent >= 2, "the unlock to node 2 was retried: {sent} sent");
    cluster.heal(&[2]).unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let left = [
        crate::common::holds(&cluster.lockers()[0], &uid),
        crate::common::holds(&cluster.lockers()[1], &uid),
        crate::common::holds(&cluster.lockers()[2], &uid),
    ];
    eprintln!(
        "{} unlocks sent to node 2; 10 s after it answered again, nodes holding the uid: {left:?}",
        unlocks.load(Ordering::SeqCst)
    );
    assert!(
        !left.iter().any(|h| *h),
        "an unlock made outside a runtime with the default timeouts dropped its retry to a \
         silent locker with its private runtime, and the locker kept the released uid's entry \
         after it answered again: {left:?}"
    );
}
