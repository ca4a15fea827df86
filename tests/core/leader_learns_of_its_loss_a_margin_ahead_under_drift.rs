//! docs/election.md, "One leader at a time": a leader learns that it lost
//! the lead before any locker can free it for the next candidate, the
//! safety margin before with clocks at the same rate, less what drift
//! within the bound takes (docs/guarantees.md, "the drift bound": a
//! locker's clock up to 1.2 times as fast as a holder's). Here the lockers
//! run 1.1 times as fast and the leader is cut off from every locker: the
//! next candidate leads no sooner than `validity / 1.1 − (validity −
//! margin)` after the leader's loss fired (4.5 s of the default 10 s).
//! A review found the docs promising the whole margin under drift.
#![cfg(feature = "testing")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorum_lock::testing::{DriftClock, TestCluster};
use quorum_lock::{Dsync, Lease, LockerConfig};
use tokio::time::{sleep, Instant};

const LOCKERS_RATE: f64 = 1.1;

fn client(cluster: &TestCluster, owner: &str) -> Dsync {
    Dsync::builder(cluster.net_lockers())
        .owner(owner)
        .rng_seed(5)
        .clock(DriftClock::new())
        .build()
        .expect("valid settings")
}

#[tokio::test(start_paused = true)]
async fn a_cut_off_leader_learns_of_its_loss_before_the_next_leads_by_what_drift_leaves_of_the_margin(
) {
    let lease = Lease::default();
    let validity = LockerConfig::default().validity;
    // What the lockers' faster clocks leave of the margin: they free the
    // entry after `validity` of their time, the leader gives up after
    // `validity - margin` of its own.
    let margin = validity.div_f64(LOCKERS_RATE) - (validity - lease.safety_margin);
    let mut failures = Vec::new();
    for cut_ms in [0u64, 4_999, 17_300] {
        let cluster = Arc::new(TestCluster::with_clocks(3, 9, LockerConfig::default()));
        cluster.set_rate(LOCKERS_RATE, &[0, 1, 2]).unwrap();
        let (h, c) = (client(&cluster, "h"), client(&cluster, "c"));
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
        sleep(Duration::from_millis(cut_ms)).await;
        cluster.partition("h", &[0, 1, 2]).unwrap();
        let (led_at, l) = next.await.unwrap();
        assert!(l.is_ok(), "{l:?}");
        watcher.await.unwrap();
        let lost = lost_at.lock().unwrap().expect("the loss fired");
        let ahead = led_at.saturating_duration_since(lost);
        if ahead < margin {
            failures.push(format!(
                "cut {cut_ms} ms after it led: the leader learned of its loss only {ahead:?} \
                 before the next candidate led (what drift leaves of the margin: {margin:?})"
            ));
        }
        drop(leading);
    }
    assert!(
        failures.is_empty(),
        "lockers' clocks at {LOCKERS_RATE}:\n{}",
        failures.join("\n")
    );
}
