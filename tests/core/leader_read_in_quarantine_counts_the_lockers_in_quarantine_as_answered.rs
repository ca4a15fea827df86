//! Reproduces a past break: `leader()` with two of three lockers in quarantine after a restart failed with `QuorumUnavailable { answered: 1, .. }`, naming both lockers, which had just refused the read for their quarantine, as lockers that did not answer, where a campaign in the same state says `Quarantined`.
//!
//! `Error::QuorumUnavailable`: `answered` counts "Lockers that gave an
//! answer in time that counts towards the quorum or against it: ... a
//! refusal for a quarantine that still stands"; `unreachable`: "The lockers
//! that did not answer". `Error::Quarantined`: "Enough lockers are
//! reachable, but too few of them grant because some restarted recently".
//! docs/guarantees.md ("Why a wait waits"): a refusal for quarantine
//! stands until its time passes or the locker answers a call that a locker
//! in quarantine refuses, "a term, a value or a leader read of an
//! election" among them; `Quarantined` "when lockers in quarantine after a
//! restart are what keeps a quorum from granting".
//!
//! Three lockers, quorum two. Nodes 1 and 2 restarted 100 ms ago (59.9 s
//! of quarantine left). `leader()` of election "e": node 0 answers "no
//! leader", nodes 1 and 2 refuse for quarantine. Then a campaign of "e"
//! with 300 ms.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Error};
use tokio::time::sleep;

const SEED: u64 = 38_004;

#[tokio::test(start_paused = true)]
async fn leader_read_in_quarantine_counts_the_lockers_in_quarantine_as_answered() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let h = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(SEED)
        .build()
        .unwrap();
    cluster.restart(&[1, 2]).unwrap();
    sleep(Duration::from_millis(100)).await;
    let e = h.election("e").unwrap();
    let read = tokio::time::timeout(Duration::from_secs(10), e.leader())
        .await
        .expect("the read ends");
    eprintln!("leader(): {read:?}");
    let campaign = tokio::time::timeout(
        Duration::from_secs(10),
        e.campaign_timeout(b"v".to_vec(), Duration::from_millis(300)),
    )
    .await
    .expect("the campaign gives up")
    .map(|_leadership| ());
    eprintln!("campaign_timeout in the same state: {campaign:?}");
    assert!(
        cluster.lockers()[1].is_quarantined() && cluster.lockers()[2].is_quarantined(),
        "the state this test means: nodes 1 and 2 in quarantine"
    );
    if let Err(Error::QuorumUnavailable {
        answered,
        unreachable,
        ..
    }) = &read
    {
        let named: Vec<&str> = unreachable.iter().map(|u| u.endpoint.as_str()).collect();
        panic!(
            "nodes 1 and 2 answered the read at once, refusing it for a quarantine that still \
             stands (59.9 s), and node 0 answered: lockers in quarantine are what keeps a quorum \
             (Quarantined, as a campaign in the same state says: {campaign:?}); yet leader() \
             says {read:?}, counting {answered} answered and naming {named:?} as lockers that \
             did not answer"
        );
    }
}
