//! Reproduces a past break: a campaign whose term draw one locker refused (connection refused) and another left unanswered gave up with `Timeout`, counting the refusing locker as answering, once an older call of the same client to it (asked before the grant) timed out.
//!
//! docs/guarantees.md ("Why a wait waits"): "After a grant, a locker is
//! out of reach when a call asked since the grant failed, with no answer
//! after ..., or when it has left such a call unanswered for too long;
//! with too few of the others, the operation gives up with
//! `QuorumUnavailable` naming those out of reach and why". The older
//! call's timeout is no news of the locker, but it is no answer either:
//! the term draw it refused since the grant still stands. The coordinator
//! keeps one failure per locker, the latest noted, and `after_grant`
//! filters it by when its call was asked, so the older call's timeout
//! hides the newer refusal.
//!
//! Three lockers answering in 1 ms (quorum 2). At 10 ms the client sends
//! `force_unlock(["other"])`, whose reply from node 1 is lost: that call
//! fails with `LockerTimeout` at ~5010 ms. Node 2 is down (calls hang) from
//! 4800 ms. At 4900 ms the client campaigns with a deadline of 500 ms; its
//! lock is granted by nodes 0 and 1 at 4901 ms, node 1 refusing
//! connections from just before that, so the term draw finds node 1
//! refusing and node 2 silent. At 5400 ms nodes 1 and 2 are both out of
//! reach; the campaign says `Timeout`, with node 1 counted as answering.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_campaign_with_a_deadline::{campaign_ended, spawn_campaign};
use crate::a_wait_for_a_held_lock::warm;
use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::Error;
use tokio::time::{sleep, Instant};

const SEED: u64 = 4_613;

async fn campaign_gives_up(older_call: bool) -> Result<(), Error> {
    eprintln!("seed {SEED}, an older call lost: {older_call}");
    let cluster = TestCluster::new(3, SEED);
    let fast = Latency::Fixed(Duration::from_millis(1));
    cluster.set_latency(fast, &[0, 1, 2]).unwrap();
    let h = common::seeded(cluster.net_lockers(), "h", SEED);
    let start = Instant::now();
    // The client's lockers have answered it before (in 1 ms).
    warm(&h).await;
    sleep(Duration::from_millis(10).saturating_sub(start.elapsed())).await;
    if older_call {
        cluster.drop_replies(1.0, false, &[1]).unwrap();
    }
    let admin = h.clone();
    let lost = tokio::spawn(async move { admin.force_unlock(["other"]).await });
    sleep(Duration::from_millis(5)).await;
    cluster.heal(&[1]).unwrap();
    cluster.set_latency(fast, &[1]).unwrap();
    sleep(Duration::from_millis(4_800).saturating_sub(start.elapsed())).await;
    cluster.crash(&[2]).unwrap();
    sleep(Duration::from_millis(4_900).saturating_sub(start.elapsed())).await;
    let campaign = spawn_campaign(&h, Duration::from_millis(500));
    // The lock calls are on their way (1 ms); what follows them is refused.
    sleep(Duration::from_micros(500)).await;
    cluster.set_refuse(true, &[1]).unwrap();
    let result = campaign_ended(campaign, Duration::from_secs(5)).await;
    eprintln!("gave up at {:?} with: {result:?}", start.elapsed());
    let lost = tokio::time::timeout(Duration::from_secs(5), lost).await;
    eprintln!("the force_unlock of \"other\": {lost:?}");
    result
}

fn assert_names_both(result: Result<(), Error>) {
    let Err(Error::QuorumUnavailable {
        answered,
        unreachable,
        ..
    }) = result
    else {
        panic!("node 1 refused the term and node 2 never answered: {result:?}");
    };
    assert_eq!(answered, 1, "{unreachable:?}");
    let mut named: Vec<&str> = unreachable.iter().map(|u| u.endpoint.as_str()).collect();
    named.sort_unstable();
    assert_eq!(named, ["node-1", "node-2"]);
}

#[tokio::test(start_paused = true)]
async fn campaign_timeout_names_a_locker_that_refused_the_term() {
    assert_names_both(campaign_gives_up(false).await);
}

#[tokio::test(start_paused = true)]
async fn campaign_timeout_names_a_locker_that_refused_the_term_before_an_older_call_to_it_timed_out(
) {
    assert_names_both(campaign_gives_up(true).await);
}
