//! Reproduces a past break: a campaign that gave up in its backoff after the quarantine it was refused for had ended said `Timeout` ("held elsewhere") though, since its grant, calls of the same client had found two of three lockers refusing connections, where a wait in the same state says `QuorumUnavailable`.
//!
//! `Error::Timeout`: "timed out waiting for the lock: it is held
//! elsewhere"; "A wait that gives up while a quorum is unreachable or in
//! quarantine ends with `QuorumUnavailable` or `Quarantined` instead, so
//! that 'someone else has it' is never confused with 'the cluster is
//! down'". docs/guarantees.md ("Why a wait waits"): a step refused for
//! quarantine "is the exception, since a quarantine ends or its lockers go
//! away while the operation backs off: the operation then gives up with
//! what its lockers say at that moment"; "After a grant, a locker is out of
//! reach when a call asked since the grant failed, with no answer after
//! ...; with too few of the others, the operation gives up with
//! `QuorumUnavailable` naming those out of reach and why".
//!
//! The scenario of campaign_timeout_in_backoff_after_the_quarantine_ended
//! (three lockers, quorum two, answers 10 ms late, backoff 1 s; node 2's
//! quarantine ends some 40 ms after the campaign's step is refused for it;
//! node 1 refuses connections), and 250 ms after the campaign began node 0
//! refuses connections too, which a try_lock of "x" of the same client
//! finds. The campaign gives up at 300 ms, in its backoff: only node 2
//! answers. A `lock_timeout` of "y" in the same state gives up with
//! `QuorumUnavailable`.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::CallKind;
use quorum_lock::Error;
use tokio::time::{sleep, Instant};

const SEED: u64 = 19_006;

#[tokio::test(start_paused = true)]
async fn campaign_timeout_in_backoff_after_the_quarantine_ended_with_a_quorum_found_down() {
    eprintln!("seed {SEED}");
    let start = Instant::now();
    let (cluster, h) = common::quarantine_ending_soon(SEED).await;
    let election = h.election("e").unwrap();
    let began = Instant::now();
    let campaign = tokio::spawn(async move {
        election
            .campaign_timeout(b"v".to_vec(), Duration::from_millis(300))
            .await
            .map(|_leadership| ())
    });
    for _ in 0..2_000 {
        sleep(Duration::from_millis(1)).await;
        if cluster.stats(CallKind::Fence).seen >= 3 {
            break;
        }
    }
    cluster.set_refuse(true, &[1]).unwrap();
    sleep(Duration::from_millis(250).saturating_sub(began.elapsed())).await;
    cluster.set_refuse(true, &[0]).unwrap();
    let x = tokio::time::timeout(
        Duration::from_millis(40),
        h.rw_mutex(["x"]).unwrap().try_lock(),
    )
    .await;
    eprintln!(
        "try_lock of 'x' at {:?}: {:?}",
        began.elapsed(),
        x.as_ref().map(|r| r.as_ref().map(|_| ()))
    );
    let result = tokio::time::timeout(Duration::from_secs(10), campaign)
        .await
        .expect("gives up")
        .unwrap();
    let q = cluster.lockers()[2].is_quarantined();
    eprintln!(
        "campaign gave up at {:?} (campaign {:?}) with {result:?}; node 2 in quarantine: {q}",
        start.elapsed(),
        began.elapsed()
    );
    assert!(!q, "the state this test means: node 2 out of quarantine");
    let waited = tokio::time::timeout(
        Duration::from_secs(10),
        h.rw_mutex(["y"])
            .unwrap()
            .lock_timeout(Duration::from_millis(50)),
    )
    .await
    .expect("the wait gives up")
    .map(|_guard| ());
    eprintln!("a lock wait in the same state: {waited:?}");
    assert!(
        matches!(&waited, Err(Error::QuorumUnavailable { .. })),
        "the state this test means: nodes 0 and 1 refuse connections: {waited:?}"
    );
    assert!(
        !matches!(&result, Err(Error::Timeout)),
        "nodes 0 and 1 were found refusing connections since the campaign's grant, and only \
         node 2 answers: the cluster is down, not the lock held elsewhere; yet the campaign \
         says {result:?}"
    );
    drop(x);
}
