//! Reproduces a past break: after a confirmed resign, `leader()` reported the resigned leader again once its late re-check and re-sent value reached the lockers, with no locker restarted.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::NetLocker;
use tokio::time::{sleep, Instant};

const SEED: u64 = 4242;

/// `inner` through a link that, while `late_locks` is set, delivers lock
/// calls (a waiting candidate's re-check) 20 s later, and, while
/// `late_values` is set, proclamations 25 s later, counting them. Such a
/// message is on the wire: it reaches the locker even if the sender stops
/// waiting for the answer.
fn late_link(
    inner: Arc<dyn NetLocker>,
    late_locks: Arc<AtomicBool>,
    late_values: Arc<AtomicBool>,
    delayed: Arc<[AtomicUsize; 2]>,
) -> Arc<dyn NetLocker> {
    Arc::new(Relay::new(inner, move |kind, _| {
        if kind == CallKind::Lock && late_locks.load(Ordering::SeqCst) {
            delayed[0].fetch_add(1, Ordering::SeqCst);
            Route::Late(Duration::from_secs(20))
        } else if kind == CallKind::Proclaim && late_values.load(Ordering::SeqCst) {
            delayed[1].fetch_add(1, Ordering::SeqCst);
            Route::Late(Duration::from_secs(25))
        } else {
            Route::Forward
        }
    }))
}

/// Three lockers, none restarted. "x" leads; "l" campaigns and waits in
/// line. Its re-check of the place (about 1 s in) is slow on every link;
/// x resigns, the lockers push l its grants, and l leads. Its re-send of
/// its value (a refresh interval later) is slow on every link too; l then
/// resigns, confirmed by all three lockers. docs/election.md: "After a
/// `resign()` that returned `Ok`, `leader()` returns `None` or a newer
/// leader: the resigned term is on fewer lockers than a write quorum from
/// then on" (the one exception named is late messages reaching a locker
/// that restarted after the resign). Here the re-check arrives after the
/// unlock and re-creates l's entry on every locker, the re-sent value
/// lands on it, and `leader()` reports l's term again until the entries
/// expire.
#[tokio::test(start_paused = true)]
async fn leader_after_a_confirmed_resign_is_not_brought_back_by_a_late_re_check_and_value() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let late_locks = Arc::new(AtomicBool::new(false));
    let late_values = Arc::new(AtomicBool::new(false));
    let delayed = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let links: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .map(|l| late_link(l, late_locks.clone(), late_values.clone(), delayed.clone()))
        .collect();
    let x = common::seeded(cluster.net_lockers(), "x", SEED);
    let l = common::seeded(links, "l", SEED + 1);
    let reader = common::seeded(cluster.net_lockers(), "reader", SEED + 2);
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
    late_locks.store(true, Ordering::SeqCst);
    sleep(Duration::from_millis(1000)).await;
    late_locks.store(false, Ordering::SeqCst);
    let late_checks = delayed[0].load(Ordering::SeqCst);
    eprintln!(
        "at {:?}: l's re-checks on their way: {late_checks}",
        start.elapsed()
    );
    assert!(late_checks >= 3, "l re-checks its place within a second");
    x_leads.resign().await.unwrap();
    let mut l_leads = tokio::time::timeout(Duration::from_secs(1), campaign)
        .await
        .expect("l is pushed its grants and leads")
        .unwrap()
        .unwrap();
    let term = l_leads.term();
    eprintln!("at {:?}: l leads, term {term}", start.elapsed());

    late_values.store(true, Ordering::SeqCst);
    for _ in 0..200 {
        if delayed[1].load(Ordering::SeqCst) >= 3 {
            break;
        }
        sleep(Duration::from_millis(100)).await;
    }
    late_values.store(false, Ordering::SeqCst);
    eprintln!(
        "at {:?}: l's re-sent values on their way: {}",
        start.elapsed(),
        delayed[1].load(Ordering::SeqCst)
    );
    l_leads
        .resign()
        .await
        .expect("all three lockers confirm the resign");
    let resigned = start.elapsed();
    eprintln!("at {resigned:?}: l resigned, confirmed");

    let mut reads = Vec::new();
    for _ in 0..8 {
        sleep(Duration::from_secs(5)).await;
        let leader = reader.election("e").unwrap().leader().await;
        let read = leader.map(|found| found.map(|leader| leader.term));
        eprintln!("at {:?}: leader() {read:?}", start.elapsed());
        reads.push((start.elapsed(), read));
    }
    let back: Vec<_> = reads
        .iter()
        .filter(|(_, read)| *read == Ok(Some(term)))
        .map(|(at, _)| *at)
        .collect();
    assert!(
        back.is_empty(),
        "l resigned at {resigned:?}, confirmed, and no locker restarted, yet leader() reported \
         its term {term} again at {back:?}"
    );
}
