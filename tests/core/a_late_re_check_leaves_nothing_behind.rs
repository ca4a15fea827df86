//! A waiter re-checks its place in line about a second after it queued.
//! When that re-check is slow on every link and reaches the lockers only
//! after the waiter let go (its lock released, its campaign dropped), the
//! lockers grant it there; the late grant must be taken back, not left
//! until it expires with nobody else able to take the name meanwhile.
//!
//! The scenes: three reachable lockers, none restarted; "x" holds the
//! name (a lock, or the lead), the waiter's re-checks are held on their
//! way for 20 s, and 25 s after the waiter let go nothing may be left and
//! a third client ("y") must get the name at once.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, NetLocker};
use tokio::time::{sleep, Instant};

/// The cluster, the holder "x", the waiter (over links that hold its
/// re-checks up while `late` is set) and "y", which comes last.
struct Scene {
    cluster: TestCluster,
    late: Arc<AtomicBool>,
    delayed: Arc<AtomicUsize>,
    x: Dsync,
    waiter: Dsync,
    y: Dsync,
    start: Instant,
}

impl Scene {
    fn new(seed: u64, waiter: &str) -> Self {
        eprintln!("seed {seed}");
        let cluster = TestCluster::new(3, seed);
        let late = Arc::new(AtomicBool::new(false));
        let delayed = Arc::new(AtomicUsize::new(0));
        let links: Vec<Arc<dyn NetLocker>> = cluster
            .net_lockers()
            .into_iter()
            .map(|l| common::late_locks(l, late.clone(), delayed.clone(), Duration::from_secs(20)))
            .collect();
        Scene {
            x: common::seeded(cluster.net_lockers(), "x", seed),
            waiter: common::seeded(links, waiter, seed + 1),
            y: common::seeded(cluster.net_lockers(), "y", seed + 2),
            cluster,
            late,
            delayed,
            start: Instant::now(),
        }
    }

    /// Lets the waiter queue, then holds up what it sends in the next
    /// second: its re-checks of the place.
    async fn hold_up_the_re_checks(&self) {
        sleep(Duration::from_millis(500)).await;
        self.late.store(true, Ordering::SeqCst);
        sleep(Duration::from_millis(1000)).await;
        self.late.store(false, Ordering::SeqCst);
        let late_checks = self.delayed.load(Ordering::SeqCst);
        eprintln!(
            "at {:?}: the re-checks on their way: {late_checks}",
            self.start.elapsed()
        );
        assert!(
            late_checks >= 3,
            "the waiter re-checks its place within a second"
        );
    }

    /// The entries left on the lockers, by locker and owner, once the
    /// re-checks (landing at about 21 s) were answered and any undo landed.
    async fn left_after_the_re_checks(&self) -> Vec<(usize, String)> {
        sleep(Duration::from_secs(25)).await;
        self.cluster
            .lockers()
            .iter()
            .enumerate()
            .flat_map(|(i, n)| n.snapshot().into_iter().map(move |e| (i, e.owner)))
            .collect()
    }
}

/// Reproduces a past break: a waiter's re-check that reached the lockers
/// after the lock's confirmed unlock re-created its entries on every
/// locker, left there until they expired. docs/guarantees.md ("No leaks
/// from cancellation or failure"): "calls still in flight finish in the
/// background and undo any grant they receive".
#[tokio::test(start_paused = true)]
async fn a_released_lock_leaves_no_entry_behind_when_its_re_check_arrives_after_the_unlock() {
    let scene = Scene::new(4343, "w");
    let held = scene.x.rw_mutex(["res"]).unwrap().lock().await.unwrap();
    let mutex = scene.waiter.rw_mutex(["res"]).unwrap();
    let wait = tokio::spawn(async move { mutex.lock().await });
    scene.hold_up_the_re_checks().await;
    held.unlock().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(1), wait)
        .await
        .expect("w is pushed its grants")
        .unwrap()
        .unwrap();
    guard
        .unlock()
        .await
        .expect("all three lockers confirm the unlock");
    eprintln!("at {:?}: w unlocked, confirmed", scene.start.elapsed());
    let left = scene.left_after_the_re_checks().await;
    let taken = scene
        .y
        .rw_mutex(["res"])
        .unwrap()
        .try_lock()
        .await
        .map(|_| ());
    assert!(
        left.is_empty() && taken.is_ok(),
        "w unlocked at ~1.5 s, confirmed, yet at {:?} the lockers keep {left:?} and y's try_lock \
         of \"res\" says {taken:?}",
        scene.start.elapsed()
    );
}

/// Reproduces a past break: a campaign dropped while it waited in line
/// left a grant behind once its re-check, sent before the drop, reached
/// the lockers after it. docs/election.md: "A cancelled campaign leaves no
/// place in line, grant or value behind: its undo goes out when it is
/// dropped".
#[tokio::test(start_paused = true)]
async fn a_cancelled_campaign_leaves_no_grant_behind_when_its_re_check_arrives_late() {
    let scene = Scene::new(4444, "l");
    let mut x_leads = scene
        .x
        .election("e")
        .unwrap()
        .campaign(b"x".to_vec())
        .await
        .unwrap();
    let election = scene.waiter.election("e").unwrap();
    let campaign = tokio::spawn(async move { election.campaign(b"l".to_vec()).await });
    scene.hold_up_the_re_checks().await;
    campaign.abort();
    let _ = campaign.await;
    eprintln!("at {:?}: l's campaign dropped", scene.start.elapsed());
    sleep(Duration::from_millis(100)).await;
    x_leads.resign().await.unwrap();
    let left = scene.left_after_the_re_checks().await;
    let next = scene
        .y
        .election("e")
        .unwrap()
        .try_campaign(b"y".to_vec())
        .await
        .map(|leading| leading.term());
    assert!(
        left.is_empty() && next.is_ok(),
        "l's campaign was dropped at ~1.5 s, yet at {:?} the lockers keep {left:?} and the \
         next candidate's try_campaign says {next:?}",
        scene.start.elapsed()
    );
}
