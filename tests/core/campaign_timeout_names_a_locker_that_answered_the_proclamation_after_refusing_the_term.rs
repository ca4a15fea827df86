//! Reproduces a past break: a campaign whose proclamation was answered by a locker that had refused its term draw for quarantine (and came back without one in between) gave up with `QuorumUnavailable` naming that locker as out of reach, "refusing new grants for another 59.9s", and counting one answer fewer.
//!
//! docs/guarantees.md ("Why a wait waits"), of `campaign_timeout`: "After a
//! grant, a locker is out of reach when a call to it failed since, with no
//! answer after, or when it has left a call unanswered for twice as long as
//! its latest answer took; with too few of the others, the operation gives
//! up with `QuorumUnavailable` naming those out of reach and why". The fix
//! of 63fc3f0 keeps a quarantine refusal standing, "whatever it answered
//! since", for the time the locker said was left; the operation's check
//! after the grant reads the same note, so an answer after the failure no
//! longer takes a locker out of the ones named, even when that answer is
//! the very call the campaign waits on.
//!
//! Three lockers, quorum 2: node-0 restarted (in quarantine for 60 s) and
//! answering at once (a stand-in whose server can be replaced,
//! `swapped_server_support::Swap`); nodes 1 and 2 answering after 100 ms.
//! The campaign's lock is granted by nodes 1 and 2 at 100 ms, and its term
//! draw is refused by node-0 for quarantine then. At 150 ms node-0 comes
//! back as a server without quarantine; at 200 ms it answers the
//! proclamation. At 250 ms nodes 1 and 2 die with the proclamation on its
//! way. At the 900 ms deadline one locker (node-0) answered the
//! proclamation and two did not: the error should say 1 answered and name
//! nodes 1 and 2; it says 0 answered and names node-0 as well, in
//! quarantine.
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::Duration;

use crate::a_campaign_with_a_deadline::{campaign_ended, spawn_campaign};
use crate::swapped_server_support::Swap;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error, LocalLocker, LockerConfig, NetLocker};
use tokio::time::sleep;

const SEED: u64 = 3691;

#[tokio::test(start_paused = true)]
async fn a_locker_that_answered_the_proclamation_is_not_named_out_of_reach() {
    eprintln!("seed {SEED}");
    let restarted = LocalLocker::with_config("node-0", LockerConfig::default());
    restarted.restart();
    let node0 = Arc::new(Swap::new("node-0", restarted));
    // Nodes 1 and 2 of a cluster of three; its node-0 is left out.
    let cluster = TestCluster::new(3, SEED);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[1, 2])
        .unwrap();
    let others = cluster.net_lockers();
    let lockers: Vec<Arc<dyn NetLocker>> =
        vec![node0.clone(), others[1].clone(), others[2].clone()];
    let client = Dsync::builder(lockers)
        .owner("h")
        .rng_seed(SEED)
        .build()
        .unwrap();
    let campaign = spawn_campaign(&client, Duration::from_millis(900));
    sleep(Duration::from_millis(150)).await;
    let no_quarantine = LockerConfig {
        quarantine: Duration::ZERO,
        ..LockerConfig::default()
    };
    node0.replace(LocalLocker::with_config("node-0", no_quarantine));
    sleep(Duration::from_millis(100)).await;
    cluster.crash(&[1, 2]).unwrap();
    let result = campaign_ended(campaign, Duration::from_secs(5)).await;
    eprintln!("result: {result:?}");
    let Err(Error::QuorumUnavailable {
        answered,
        unreachable,
        ..
    }) = &result
    else {
        panic!("expected QuorumUnavailable, got {result:?}");
    };
    let named: Vec<&str> = unreachable.iter().map(|u| u.endpoint.as_str()).collect();
    assert_eq!(
        named,
        ["node-1", "node-2"],
        "node-0 answered the proclamation after its refusal: {result:?}"
    );
    assert_eq!(*answered, 1, "{result:?}");
}
