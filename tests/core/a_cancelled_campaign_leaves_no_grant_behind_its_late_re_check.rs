//! Reproduces a past break: a campaign dropped while it waited in line left a grant behind once its re-check, sent before the drop, reached the lockers after it.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::NetLocker;
use tokio::time::{sleep, Instant};

const SEED: u64 = 4444;

/// Three reachable lockers, none restarted. "x" leads; "l" campaigns and
/// waits in line, its re-check of the place (about 1 s in) slow on every
/// link; the campaign is dropped at 1.5 s and x resigns. docs/election.md:
/// "A cancelled campaign leaves no place in line, grant or value behind:
/// its undo goes out when it is dropped". The re-checks reach the lockers
/// after the undo and are granted there; nothing takes them back, so the
/// lockers keep l's grant and the next candidate cannot lead until it
/// expires.
#[tokio::test(start_paused = true)]
async fn a_cancelled_campaign_leaves_no_grant_behind_when_its_re_check_arrives_late() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let late = Arc::new(AtomicBool::new(false));
    let delayed = Arc::new(AtomicUsize::new(0));
    let links: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .map(|l| common::late_locks(l, late.clone(), delayed.clone(), Duration::from_secs(20)))
        .collect();
    let x = common::seeded(cluster.net_lockers(), "x", SEED);
    let l = common::seeded(links, "l", SEED + 1);
    let y = common::seeded(cluster.net_lockers(), "y", SEED + 2);
    let start = Instant::now();

    let mut x_leads = x
        .election("e")
        .unwrap()
        .campaign(b"x".to_vec())
        .await
        .unwrap();
    let election = l.election("e").unwrap();
    let campaign = tokio::spawn(async move { election.campaign(b"l".to_vec()).await });
    sleep(Duration::from_millis(500)).await;
    late.store(true, Ordering::SeqCst);
    sleep(Duration::from_millis(1000)).await;
    late.store(false, Ordering::SeqCst);
    let late_checks = delayed.load(Ordering::SeqCst);
    eprintln!(
        "at {:?}: l's re-checks on their way: {late_checks}",
        start.elapsed()
    );
    assert!(late_checks >= 3, "l re-checks its place within a second");
    campaign.abort();
    let _ = campaign.await;
    eprintln!("at {:?}: l's campaign dropped", start.elapsed());
    sleep(Duration::from_millis(100)).await;
    x_leads.resign().await.unwrap();
    eprintln!("at {:?}: x resigned, confirmed", start.elapsed());

    sleep(Duration::from_secs(25)).await;
    let left: Vec<(usize, String)> = cluster
        .lockers()
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.snapshot().into_iter().map(move |e| (i, e.owner)))
        .collect();
    let next = y
        .election("e")
        .unwrap()
        .try_campaign(b"y".to_vec())
        .await
        .map(|leading| leading.term());
    eprintln!(
        "at {:?}: entries {left:?}; y's try_campaign {next:?}",
        start.elapsed()
    );
    assert!(
        left.is_empty() && next.is_ok(),
        "l's campaign was dropped at ~1.5 s, yet at {:?} the lockers keep {left:?} and the \
         next candidate's try_campaign says {next:?}",
        start.elapsed()
    );
}
