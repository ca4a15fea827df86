//! Reproduces a past break: a campaign whose proclamation step failed for quarantine gave up in the backoff before its retry with `Error::Quarantined`, zero time left, after the quarantine had ended.
//!
//! `Error::Quarantined`: "too few of them grant because some restarted
//! recently and refuse new grants until their quarantine ends".
//! docs/guarantees.md ("Why a wait waits"): a refusal for quarantine
//! "stands until the time it said was left has passed"; a step refused for
//! quarantine is the exception "since a quarantine ends or its lockers go
//! away while the operation backs off: the operation then gives up with
//! what its lockers say at that moment". The fix of the seventeenth review
//! (37491a9) states that "a campaign no longer gives up with Quarantined,
//! zero left, once the quarantine ended"; that holds when the campaign
//! gives up with its calls on their way (`WaitWatch::after_grant`), not
//! when it gives up in the backoff after the step (`WaitWatch::gave_up`,
//! which ages the noted refusal to zero and still says `Quarantined`).
//!
//! Three lockers, quorum two, every answer 10 ms late, a retry backoff of
//! up to 1 s. Node 2 restarted 60 s less 100 ms ago. Nodes 0 and 1 grant
//! the campaign's lock and draw its term; then node 1 refuses connections,
//! so the proclamation (or the draw's second ask) fails with `Quarantined`
//! (node 0, and node 2 in quarantine for some 40 ms more). The campaign
//! backs off; its deadline (300 ms after it began) comes 200 ms after node
//! 2's quarantine ended, while it still backs off. It says `Quarantined`
//! naming node 2, with zero left. With a deadline of 80 ms (quarantine
//! still on), the same campaign says `Quarantined` with 20 ms left.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_campaign_with_a_deadline::{campaign_ended, spawn_campaign, until_seen};
use crate::common;
use quorum_lock::testing::CallKind;
use quorum_lock::Error;
use tokio::time::Instant;

const SEED: u64 = 18_006;

async fn run(timeout: Duration) -> Result<(), Error> {
    let start = Instant::now();
    let (cluster, h) = common::quarantine_ending_soon(SEED).await;
    let began = Instant::now();
    let campaign = spawn_campaign(&h, timeout);
    until_seen(&cluster, CallKind::Fence, 3, 2_000, start).await;
    let drawn = start.elapsed();
    cluster.set_refuse(true, &[1]).unwrap();
    let result = campaign_ended(campaign, Duration::from_secs(10)).await;
    let q = cluster.lockers()[2].is_quarantined();
    assert!(
        !q || timeout < Duration::from_millis(100),
        "the state this test means: node 2 out of quarantine at the later deadline"
    );
    eprintln!(
        "timeout {timeout:?}: fence seen by {drawn:?}, gave up at {:?} (campaign {:?}) with {result:?}; node 2 in quarantine: {q}",
        start.elapsed(),
        began.elapsed()
    );
    result
}

#[tokio::test(start_paused = true)]
async fn campaign_timeout_in_backoff_after_the_quarantine_ended() {
    eprintln!("seed {SEED}");
    let before = run(Duration::from_millis(80)).await;
    assert!(
        matches!(&before, Err(Error::Quarantined { left: Some(left), .. }) if !left.is_zero()),
        "the state this test means: while node 2's quarantine lasts, the campaign says so: \
         {before:?}"
    );
    let after = run(Duration::from_millis(300)).await;
    assert!(
        !matches!(&after, Err(Error::Quarantined { .. })),
        "node 2's quarantine ended 200 ms before the campaign gave up, and nothing refused \
         it since: no locker is in quarantine, yet the campaign says {after:?}"
    );
}
