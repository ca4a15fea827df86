//! Reproduces a past break: a `try_lock` granted by one locker, refused for quarantine by a second (still in it), whose call to a third failed with a refused connection that an answer to another lock followed, said `QuorumUnavailable` with as many answered as the quorum, named the third as "no answer yet" and did not name the second.
//!
//! `Error::QuorumUnavailable`'s `answered`: "Always below `quorum`";
//! `unreachable`: "the lockers that did not answer, each with why".
//! docs/guarantees.md ("Why a wait waits"): "`Error::Quarantined` (with
//! the time left) when lockers in quarantine after a restart are what
//! keeps a quorum from granting".
//!
//! Three lockers, quorum two. Node 1 restarted just before (almost 60 s of
//! quarantine left) and answers 50 ms late; node 2 refuses connections. A
//! `try_lock` of "r" is granted by node 0 at once and node 2 refuses the
//! connection at once. 10 ms later node 2 takes connections again and
//! grants a try_lock of "x" (same client). At 50 ms node 1 refuses "r" for
//! quarantine and the round ends: node 0 granted, node 1 is in quarantine,
//! node 2 refused the connection (and answered since).
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::Error;
use tokio::time::{sleep, Instant};

const SEED: u64 = 19_004;

#[tokio::test(start_paused = true)]
async fn try_lock_quorum_unavailable_counting_a_locker_in_quarantine_beside_one_that_answered_since(
) {
    eprintln!("seed {SEED}");
    let start = Instant::now();
    let cluster = TestCluster::new(3, SEED);
    let h = common::seeded(cluster.net_lockers(), "h", SEED);
    cluster.restart(&[1]).unwrap();
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(50)), &[1])
        .unwrap();
    cluster.set_refuse(true, &[2]).unwrap();

    let r = h.rw_mutex(["r"]).unwrap();
    let x = h.rw_mutex(["x"]).unwrap();
    let side = async {
        sleep(Duration::from_millis(10)).await;
        cluster.set_refuse(false, &[2]).unwrap();
        let tried = tokio::time::timeout(Duration::from_millis(20), x.try_lock()).await;
        eprintln!(
            "try_lock of 'x' at {:?}: {:?}",
            start.elapsed(),
            tried.as_ref().map(|r| r.as_ref().map(|_| ()))
        );
        tried
    };
    let (tried, x_tried) = tokio::join!(
        tokio::time::timeout(Duration::from_secs(5), r.try_lock()),
        side
    );
    let tried = tried.expect("one round").map(|_guard| ());
    eprintln!("try_lock of 'r' ended at {:?}: {tried:?}", start.elapsed());
    assert!(
        matches!(&x_tried, Ok(Ok(_))),
        "the state this test means: node 2 answered (granted 'x') before the round of 'r' ended"
    );
    assert!(
        cluster.lockers()[1].is_quarantined(),
        "the state this test means: node 1 in quarantine"
    );
    if let Err(Error::QuorumUnavailable {
        answered,
        quorum,
        unreachable,
        ..
    }) = &tried
    {
        assert!(
            answered < quorum,
            "answered is always below the quorum: {tried:?}"
        );
        assert!(
            unreachable.iter().any(|u| u.endpoint == "node-1")
                || !unreachable
                    .iter()
                    .any(|u| u.reason.starts_with("no answer yet")),
            "node 2 answered the round at once (a refused connection) and node 1 refused it \
             for quarantine: {tried:?}"
        );
    }
    assert!(
        matches!(
            &tried,
            Err(Error::Quarantined { .. }) | Err(Error::QuorumUnavailable { .. })
        ),
        "too few grants: {tried:?}"
    );
    drop(x_tried);
}
