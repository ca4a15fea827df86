//! An observer whose pushes are all lost (its watches never reach the
//! lockers), one locker of three frozen (a stopped process: calls to it
//! neither fail nor answer), and a leader whose unlock reaches the second
//! live locker late. docs/election.md: "no leader" comes within a re-check
//! (1 s by default) after a write quorum of lockers freed the leader's
//! lock, and, with pushes lost and a locker that does not answer, at most
//! a read more. It came up to 2 s late while the observer slept a whole
//! re-check after a read the frozen locker held open; re-checks now count
//! from where the last read began, and it comes within 1.1 s.
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::Duration;

use crate::common::hooked::{Hooked, Optional};
use crate::common::{observer_of, owned_client};
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::NetLocker;
use tokio::time::Instant;

/// `unlock_late`: how much later than the others locker 1 gets the
/// leader's unlock. Returns how long after the resign returned (a write
/// quorum freed the lock then) the observer reported "no leader".
async fn no_leader_after(seed: u64, unlock_late: Duration) -> Result<Duration, String> {
    let cluster = TestCluster::new(3, seed);
    cluster.set_hang(true, &[2]).map_err(|e| e.to_string())?;
    let view: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        // Every call passes on, but no watch is registered: the lockers
        // never push.
        .map(|l| {
            Hooked::new(l)
                .without_watches()
                .lacking(&[Optional::Locks])
                .shared()
        })
        .collect();
    let watcher = owned_client(view, "watcher", seed)?;
    let mut observer = observer_of(&watcher, "jobs")?;
    let mut leader_view = cluster.net_lockers();
    leader_view[1] = Arc::new(Relay::new(
        leader_view[1].clone(),
        move |kind, _| match kind {
            CallKind::Unlock => Route::Late(unlock_late),
            _ => Route::Forward,
        },
    ));
    let leader = owned_client(leader_view, "leader", seed + 1000)?;
    let mut leading = leader
        .election("jobs")
        .map_err(|e| e.to_string())?
        .campaign(&b"z"[..])
        .await
        .map_err(|e| format!("did not lead: {e}"))?;
    let term = leading.term();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), observer.recv()).await {
            Ok(Some(Some(l))) if l.term == term => break,
            Ok(Some(_)) => {}
            Ok(None) => return Err("the observer ended".into()),
            Err(_) => return Err("the leader was never reported".into()),
        }
    }
    leading.resign().await.map_err(|e| e.to_string())?;
    let freed = Instant::now();
    match tokio::time::timeout(Duration::from_secs(10), observer.recv()).await {
        Ok(Some(None)) => Ok(freed.elapsed()),
        other => Err(format!("after the resign the observer gave {other:?}")),
    }
}

#[tokio::test(start_paused = true)]
async fn no_leader_is_reported_within_a_recheck_of_the_resign_when_pushes_are_lost() {
    // The re-check (1 s) plus a read of two live lockers that answer at
    // once.
    let bound = Duration::from_millis(1100);
    let mut failures = Vec::new();
    for seed in 0..2 {
        for late_ms in (0..2000).step_by(100) {
            let late = Duration::from_millis(late_ms);
            match no_leader_after(seed, late).await {
                Ok(took) if took <= bound => {}
                Ok(took) => failures.push(format!(
                    "seed {seed}, unlock {late_ms} ms late: \"no leader\" came {took:?} after \
                     the resign returned"
                )),
                Err(why) => failures.push(format!("seed {seed}, unlock {late_ms} ms late: {why}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
