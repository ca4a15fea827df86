//! Reproduces a past break: a campaign refused for quarantine without a stated time (a custom `NetLocker`) that gave up in its backoff after that locker had granted another lock of the same client still said `Quarantined`, though by the stated rule that grant answer ended the refusal.
//!
//! docs/guarantees.md ("Why a wait waits"): a refusal for quarantine
//! "stands until the time it said was left has passed (one that said no
//! time, until the next such answer), or until it answers a call a locker
//! in quarantine refuses (a grant or a refusal as held elsewhere, for any
//! lock of the client ...)"; the fix of the eighteenth review (17c1a79):
//! "an operation that gives up in its backoff after the quarantine it was
//! refused for ended says Timeout". `Error::Quarantined`: "too few of them
//! grant because some restarted recently and refuse new grants".
//!
//! Three lockers, quorum two, every answer 10 ms late, a retry backoff of
//! 1 s. Node 2 is wrapped in a `NetLocker` that, while switched on, refuses
//! grants, fencing draws and proclamations with the quarantine wording and
//! no "for another ...". Once the campaign's lock is granted, node 1
//! refuses connections and node 2's refusal is switched on: the term draw
//! (or proclamation) fails with `Quarantined` (left unknown) and the
//! campaign backs off. 100 ms in, node 2 stops refusing and grants a
//! try_lock of "x" of the same client (nodes 0 and 2). The campaign gives
//! up at 300 ms, in its backoff.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::hooked::Hooked;
use quorum_lock::testing::{CallKind, Latency, TestCluster};
use quorum_lock::{Dsync, Error, RetryPolicy};
use tokio::time::{sleep, Instant};

const SEED: u64 = 19_003;

#[tokio::test(start_paused = true)]
async fn campaign_timeout_in_backoff_after_a_grant_answer_ended_a_quarantine_without_a_time() {
    eprintln!("seed {SEED}");
    let start = Instant::now();
    let cluster = TestCluster::new(3, SEED);
    let refusing = Arc::new(AtomicBool::new(false));
    let mut lockers = cluster.net_lockers();
    // Refuses grants for quarantine, saying no time, while `refusing` is on.
    let on = refusing.clone();
    lockers[2] = Hooked::new(lockers[2].clone())
        .refusing(move |call, _| {
            (call.is_grant() && on.load(Ordering::SeqCst)).then(|| Error::LockerUnavailable {
                endpoint: "node-2".into(),
                reason: "restarted recently; refusing new grants until its quarantine ends".into(),
            })
        })
        .shared();
    let h = Dsync::builder(lockers)
        .owner("h")
        .rng_seed(SEED)
        .retry(RetryPolicy {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(1),
        })
        .build()
        .unwrap();
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(10)), &[0, 1, 2])
        .unwrap();
    let election = h.election("e").unwrap();
    let campaign = tokio::spawn(async move {
        election
            .campaign_timeout(b"v".to_vec(), Duration::from_millis(300))
            .await
            .map(|_leadership| ())
    });
    for _ in 0..2_000 {
        sleep(Duration::from_millis(1)).await;
        if cluster.stats(CallKind::Fence).seen >= 2 {
            break;
        }
    }
    cluster.set_refuse(true, &[1]).unwrap();
    refusing.store(true, Ordering::SeqCst);
    eprintln!(
        "node 1 refusing, node 2 in quarantine (no time) at {:?}",
        start.elapsed()
    );
    sleep(Duration::from_millis(100)).await;
    refusing.store(false, Ordering::SeqCst);
    let x = tokio::time::timeout(
        Duration::from_secs(1),
        h.rw_mutex(["x"]).unwrap().try_lock(),
    )
    .await
    .expect("one round");
    eprintln!(
        "try_lock of 'x' at {:?}: {:?}",
        start.elapsed(),
        x.as_ref().map(|_| ())
    );
    assert!(
        x.is_ok(),
        "the state this test means: nodes 0 and 2 grant 'x'"
    );
    let result = tokio::time::timeout(Duration::from_secs(10), campaign)
        .await
        .expect("gives up")
        .unwrap();
    eprintln!("campaign gave up at {:?} with {result:?}", start.elapsed());
    assert!(
        !matches!(&result, Err(Error::Quarantined { .. })),
        "node 2 granted 'x' for this client after its refusal, which ends a refusal that \
         said no time, and nothing refused since: yet the campaign says {result:?}"
    );
    drop(x);
}
