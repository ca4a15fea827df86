//! Just inside the documented drift bound (a locker's clock less than 1.2
//! times as fast as a holder's): a holder cut off from every locker learns
//! of its loss before a waiter in line, or the next candidate of an
//! election, is granted, whichever clock runs fast and whenever the cut
//! comes.
#![cfg(feature = "testing")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorum_lock::testing::{DriftClock, TestCluster};
use quorum_lock::{Dsync, LockerConfig};
use tokio::time::{sleep, Instant};

/// Just under the bound: 60 s / (60 s - 10 s) = 1.2.
const RATIO: f64 = 1.19;

fn client(cluster: &TestCluster, owner: &str, clock: &DriftClock) -> Dsync {
    Dsync::builder(cluster.net_lockers())
        .owner(owner)
        .rng_seed(5)
        .clock(clock.clone())
        .build()
        .expect("valid settings")
}

/// The cases: (lockers' rate, holder's rate, contender's rate, when the
/// holder is cut off after it got the lock).
fn cases() -> Vec<(f64, f64, f64, Duration)> {
    let mut cases = Vec::new();
    for (lockers, holder) in [(RATIO, 1.0), (1.0, 1.0 / RATIO), (1.09, 0.92)] {
        for contender in [1.0, holder, lockers] {
            for cut_ms in [0, 1, 4_999, 5_001, 17_300, 29_999, 44_444] {
                cases.push((lockers, holder, contender, Duration::from_millis(cut_ms)));
            }
        }
    }
    cases
}

/// A lock: the holder is cut off `cut` after its grant; the contender
/// waits in line (pushed grants). Its grant must come after the holder's
/// loss was signalled.
#[tokio::test(start_paused = true)]
async fn a_waiter_is_granted_only_after_the_cut_off_holder_knows_it_lost() {
    for (lockers, holder_rate, contender_rate, cut) in cases() {
        let cluster = Arc::new(TestCluster::with_clocks(3, 9, LockerConfig::default()));
        cluster.set_rate(lockers, &[0, 1, 2]).unwrap();
        let (hc, cc) = (DriftClock::new(), DriftClock::new());
        hc.set_rate(holder_rate).unwrap();
        cc.set_rate(contender_rate).unwrap();
        let (h, c) = (client(&cluster, "h", &hc), client(&cluster, "c", &cc));
        let guard = h.rw_mutex(["r"]).unwrap().lock().await.unwrap();
        let lost_at = Arc::new(Mutex::new(None));
        let watcher = tokio::spawn({
            let lost = guard.lost();
            let lost_at = lost_at.clone();
            async move {
                lost.await;
                *lost_at.lock().unwrap() = Some(Instant::now());
            }
        });
        let contender = tokio::spawn({
            let m = c.rw_mutex(["r"]).unwrap();
            async move {
                let g = m.lock().await;
                (Instant::now(), g)
            }
        });
        sleep(cut).await;
        cluster.partition("h", &[0, 1, 2]).unwrap();
        let (granted_at, g) = contender.await.unwrap();
        assert!(g.is_ok(), "{g:?}");
        let lost = *lost_at.lock().unwrap();
        assert!(
            lost.is_some_and(|l| l <= granted_at),
            "lockers at {lockers}, holder at {holder_rate:.4}, contender at {contender_rate}, \
             cut {cut:?}: the contender was granted at {granted_at:?}, the holder's loss \
             signalled at {lost:?}"
        );
        drop(guard);
        watcher.abort();
        drop(g);
    }
}

/// An election: the leader is cut off `cut` after it led; the next
/// candidate campaigns meanwhile. It leads only after the leader knew it
/// lost the lead.
#[tokio::test(start_paused = true)]
async fn the_next_candidate_leads_only_after_the_cut_off_leader_knows_it_lost() {
    for (lockers, holder_rate, contender_rate, cut) in cases() {
        let cluster = Arc::new(TestCluster::with_clocks(3, 10, LockerConfig::default()));
        cluster.set_rate(lockers, &[0, 1, 2]).unwrap();
        let (hc, cc) = (DriftClock::new(), DriftClock::new());
        hc.set_rate(holder_rate).unwrap();
        cc.set_rate(contender_rate).unwrap();
        let (h, c) = (client(&cluster, "h", &hc), client(&cluster, "c", &cc));
        let leading = h.election("e").unwrap().campaign(&b"h"[..]).await.unwrap();
        let lost_at = Arc::new(Mutex::new(None));
        let watcher = tokio::spawn({
            let lost = leading.lost();
            let lost_at = lost_at.clone();
            async move {
                lost.await;
                *lost_at.lock().unwrap() = Some(Instant::now());
            }
        });
        let next = tokio::spawn({
            let e = c.election("e").unwrap();
            async move {
                let l = e.campaign(&b"c"[..]).await;
                (Instant::now(), l)
            }
        });
        sleep(cut).await;
        cluster.partition("h", &[0, 1, 2]).unwrap();
        let (led_at, l) = next.await.unwrap();
        let l = l.unwrap();
        assert!(l.term() > leading.term());
        let lost = *lost_at.lock().unwrap();
        assert!(
            lost.is_some_and(|t| t <= led_at),
            "lockers at {lockers}, leader at {holder_rate:.4}, next at {contender_rate}, \
             cut {cut:?}: the next candidate led at {led_at:?}, the leader's loss signalled \
             at {lost:?}"
        );
        drop(leading);
        watcher.abort();
        drop(l);
    }
}
