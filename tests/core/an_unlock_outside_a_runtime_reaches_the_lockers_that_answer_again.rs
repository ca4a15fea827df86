//! An `unlock()` polled outside any runtime (on a plain thread) reaches
//! every locker that answers again within the validity: its failed
//! unlocks are retried, and a call still in flight when its private
//! runtime's thread would end is finished, not dropped.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": "An unlock
//! that fails goes to its locker's retry queue and is retried with backoff
//! until it lands or until the locker must have expired the entry by
//! itself ... So a locker that answers again within the validity is
//! cleaned up"; dropping "an `unlock()` future or a guard never leaves an
//! entry behind on a reachable locker: calls still in flight finish in the
//! background". "Any runtime": releases run "on a private one for
//! `unlock()` outside any runtime, whose thread stays until the unlocks it
//! queued have landed or stopped mattering". The guard's `unlock()` docs
//! (src/lock/guard.rs): "polled outside one (a plain thread, another
//! executor), it runs on a runtime of its own, so it works even when the
//! runtime that acquired the lock is gone or no longer driven", and a
//! release too few lockers confirmed "is then retried in the background
//! until the lockers must have expired the entries anyway".
//!
//! Every scene: three lockers grant "x"; some then fail, the holder
//! unlocks from a plain thread, and the failing lockers answer again a
//! while later, with the acquiring runtime (the test's) alive and driven
//! throughout; soon after, no locker may hold the released uid.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, NetLocker, Timeouts};

/// Reproduces a past break: an unlock polled outside any runtime queued its failed unlock on the private runtime it ran on, and that runtime ended with the drainer, so a locker that answered again within the validity kept the entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_outside_a_runtime_reaches_a_locker_that_answers_again_within_the_validity() {
    // Node 2 refuses connections; the unlock timeout of 300 ms ends the
    // private runtime 300 ms later.
    scene(Scene {
        seed: 3602,
        unlock_timeout: Some(Duration::from_millis(300)),
        fault: Fault::Refuse(&[2]),
        confirmed: true,
        back_after: Duration::from_secs(1),
        checked_after: Duration::from_secs(3),
    })
    .await;
}

/// Reproduces a past break: with nodes 1 and 2 refusing connections, the unlock made outside a runtime returned `ReleaseUnconfirmed` and was not retried once its private runtime ended, so both kept the entry after they answered again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconfirmed_unlock_outside_a_runtime_is_retried_until_the_lockers_answer_again() {
    scene(Scene {
        seed: 3602,
        unlock_timeout: Some(Duration::from_millis(300)),
        fault: Fault::Refuse(&[1, 2]),
        confirmed: false,
        back_after: Duration::from_secs(1),
        checked_after: Duration::from_secs(3),
    })
    .await;
}

/// Reproduces a past break: an unlock polled outside any runtime returned once a quorum confirmed, and its private runtime ended while the unlock to a silent locker was still in flight (its deadline 8 s), so that call was dropped without reaching the retry queue and the locker kept the entry after it answered again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_outside_a_runtime_finishes_a_call_still_in_flight_when_its_thread_ends() {
    scene(Scene {
        seed: 3661,
        unlock_timeout: Some(Duration::from_secs(8)),
        fault: Fault::Hang,
        confirmed: true,
        back_after: Duration::from_secs(6),
        checked_after: Duration::from_secs(4),
    })
    .await;
}

/// Reproduces a past break: the same with the default timeouts (unlock 5 s, so the private thread lingers 5 s): node 2's first unlock failed at once (a connection reset) and its quick retry, sent 10 ms later into a locker that then hung, was the call dropped in flight when the thread ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_outside_a_runtime_finishes_its_retry_still_in_flight_when_its_thread_ends() {
    // 10 s: a probe of the retry queue sent while node 2 hung waits out
    // its own 5 s deadline first.
    scene(Scene {
        seed: 3661,
        unlock_timeout: None,
        fault: Fault::ResetThenHang,
        confirmed: true,
        back_after: Duration::from_secs(6),
        checked_after: Duration::from_secs(10),
    })
    .await;
}

#[derive(Clone, Copy, Debug)]
enum Fault {
    /// These nodes refuse connections.
    Refuse(&'static [usize]),
    /// Node 2 stops answering: calls hang.
    Hang,
    /// Node 2's first unlock fails at once (a connection reset), and from
    /// then on it hangs.
    ResetThenHang,
}

#[derive(Clone, Copy, Debug)]
struct Scene {
    seed: u64,
    /// `Timeouts::unlock`, or the default.
    unlock_timeout: Option<Duration>,
    fault: Fault,
    /// Whether a quorum confirms the unlock.
    confirmed: bool,
    /// How long after the unlock returned the nodes answer again.
    back_after: Duration,
    /// How long after that no node may hold the released uid.
    checked_after: Duration,
}

async fn scene(s: Scene) {
    eprintln!("seed {}, {s:?}", s.seed);
    let cluster = TestCluster::new(3, s.seed);
    let unlocks = Arc::new(AtomicUsize::new(0));
    let lockers: Vec<Arc<dyn NetLocker>> = match s.fault {
        Fault::ResetThenHang => cluster
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
            .collect(),
        _ => cluster.net_lockers(),
    };
    let mut builder = Dsync::builder(lockers).owner("a").rng_seed(s.seed);
    if let Some(unlock) = s.unlock_timeout {
        builder = builder.timeouts(Timeouts {
            unlock,
            ..Timeouts::default()
        });
    }
    let ds = builder.build().expect("valid coordinator");
    let guard = crate::common::try_lock_x(&ds).await;
    let uid = guard.uid().to_owned();
    assert!(
        crate::common::holds(&cluster.lockers()[2], &uid),
        "node 2 granted"
    );

    let failing: &[usize] = match s.fault {
        Fault::Refuse(nodes) => {
            cluster.set_refuse(true, nodes).unwrap();
            nodes
        }
        Fault::Hang => {
            cluster.set_hang(true, &[2]).unwrap();
            &[2]
        }
        Fault::ResetThenHang => &[2],
    };
    let unlocked = crate::common::unlock_on_a_plain_thread(guard).await;
    if s.confirmed {
        unlocked.expect("a quorum confirms the unlock");
    } else {
        assert!(
            matches!(unlocked, Err(quorum_lock::Error::ReleaseUnconfirmed { .. })),
            "only node 0 confirms: {unlocked:?}"
        );
    }

    tokio::time::sleep(s.back_after).await;
    if matches!(s.fault, Fault::ResetThenHang) {
        let sent = unlocks.load(Ordering::SeqCst);
        assert!(sent >= 2, "the unlock to node 2 was retried: {sent} sent");
    }
    cluster.heal(failing).unwrap();
    tokio::time::sleep(s.checked_after).await;
    let left = crate::common::holding(cluster.lockers(), &uid);
    eprintln!(
        "{:?} after nodes {failing:?} answered again ({} unlocks sent to node 2 through the \
         relay), nodes holding the uid: {left:?}",
        s.checked_after,
        unlocks.load(Ordering::SeqCst)
    );
    assert!(
        !left.iter().any(|h| *h),
        "an unlock made outside a runtime ({:?}) left the released uid's entry on a locker \
         that answered again within the validity: {left:?}",
        s.fault
    );
}
