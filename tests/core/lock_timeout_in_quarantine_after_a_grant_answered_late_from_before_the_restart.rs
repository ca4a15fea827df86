//! Reproduces a past break: a grant that a locker gave before its restart, whose reply reached the client after the locker had refused a wait for quarantine, ended that refusal, so the wait gave up with `QuorumUnavailable` (the locker counted nowhere) while the locker was still in quarantine for almost a minute.
//!
//! docs/guarantees.md ("Why a wait waits"): `Error::Quarantined` "when
//! lockers in quarantine after a restart are what keeps a quorum from
//! granting"; a refusal for quarantine stands until its time has passed
//! "or until it answers a call a locker in quarantine refuses"; "Only calls
//! asked since the request it answered count ...: an older call of another
//! lock, slow, lost or timing out later, is no news of a locker that
//! answered a later one." A grant given before the restart says nothing of
//! the quarantine that began after it.
//!
//! Three lockers, quorum two, a retry backoff of 1 s. Node 1 refuses
//! connections. Node 2's replies to lock calls of "x" spend 50 ms on the
//! way back (the locker has already applied them). At 0 ms a try_lock of
//! "x" is granted by node 0 and, at once, by node 2 (its reply on the way).
//! At 1 ms node 2 restarts (quarantine 60 s). At 2 ms `lock_timeout(100ms)`
//! of "r": node 0 grants, node 1 refuses the connection, node 2 refuses for
//! quarantine ("for another 60s"); the round fails and the wait backs off.
//! At 50 ms node 2's grant of "x" (from before the restart) arrives. The
//! wait gives up at 102 ms (before its next round), node 2 still in
//! quarantine for almost 60 s.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common::hooked::{Call, Hooked};
use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Error, RetryPolicy};
use tokio::time::{sleep, Instant};

const SEED: u64 = 19_005;

#[tokio::test(start_paused = true)]
async fn lock_timeout_in_quarantine_after_a_grant_answered_late_from_before_the_restart() {
    eprintln!("seed {SEED}");
    let start = Instant::now();
    let cluster = TestCluster::new(3, SEED);
    let mut lockers = cluster.net_lockers();
    // Replies to lock calls of "x" take 50 ms on the way back.
    lockers[2] = Hooked::new(lockers[2].clone())
        .replying_late(|call, args| {
            let of_x = args.resources.iter().any(|r| r == "x");
            (of_x && matches!(call, Call::Lock | Call::RLock | Call::LockWait))
                .then_some(Duration::from_millis(50))
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
    cluster.set_refuse(true, &[1]).unwrap();
    let x = h.rw_mutex(["x"]).unwrap();
    let r = h.rw_mutex(["r"]).unwrap();
    let wait = async {
        sleep(Duration::from_millis(1)).await;
        cluster.restart(&[2]).unwrap();
        sleep(Duration::from_millis(1)).await;
        let look = async {
            sleep(Duration::from_millis(80)).await;
            let status = r.waiting();
            eprintln!(
                "waiting() at {:?}: {}",
                start.elapsed(),
                status.as_ref().map(ToString::to_string).unwrap_or_default()
            );
        };
        let (result, ()) = tokio::join!(
            tokio::time::timeout(
                Duration::from_secs(10),
                r.lock_timeout(Duration::from_millis(100))
            ),
            look
        );
        result.expect("the wait gives up").map(|_guard| ())
    };
    let (x_tried, result) = tokio::join!(
        tokio::time::timeout(Duration::from_secs(5), x.try_lock()),
        wait
    );
    eprintln!(
        "try_lock of 'x': {:?}",
        x_tried.as_ref().map(|r| r.as_ref().map(|_| ()))
    );
    let q = cluster.lockers()[2].is_quarantined();
    eprintln!(
        "gave up at {:?} with {result:?}; node 2 in quarantine: {q}",
        start.elapsed()
    );
    assert!(
        matches!(&x_tried, Ok(Ok(_))),
        "the state this test means: nodes 0 and 2 granted 'x' before node 2 restarted"
    );
    assert!(
        q,
        "the state this test means: node 2 still in quarantine at the deadline"
    );
    assert!(
        matches!(&result, Err(Error::Quarantined { quarantined, .. }) if quarantined == &["node-2".to_owned()]),
        "node 0 granted, node 1 is down and node 2, in quarantine for almost a minute more, \
         refused the wait for it: quarantine keeps the quorum; its grant of 'x' was given \
         before the restart. The wait says {result:?}"
    );
    drop(x_tried);
}
