//! An observer while a leader that leads for seconds proclaims a new value
//! every 100 ms, one locker of three answers the observer 300 ms late, and
//! another was cut off from the leader (so it answers "nothing here").
//! docs/election.md: "a leader whose values change faster than a read
//! takes is still reported", and "a leadership that lasts longer than two
//! reads ... is reported, unless its pushes were lost". No push is lost
//! here and every locker answers every read; the leadership lasts 10 s.
//! (The same leader that proclaims nothing in those 10 s is reported.)
//! Both tests failed while a read that a push hurried ended as soon as a
//! write quorum answered, before the slow locker that would settle it:
//! a slow locker now gets twice its last answer's time.
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::Duration;

use crate::common::{observer_of, owned_client};
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, NetLocker};
use tokio::time::{sleep, Instant};

/// The observer's view of a locker whose answers to reads come back late.
fn slow_reads(inner: Arc<dyn NetLocker>, by: Duration) -> Arc<dyn NetLocker> {
    Arc::new(Relay::new(inner, move |kind, _| match kind {
        CallKind::Leader => Route::SlowReply(by),
        _ => Route::Forward,
    }))
}

async fn leader_is_reported(seed: u64) -> Result<(), String> {
    let cluster = TestCluster::new(3, seed);
    // Locker 0 never sees the leader's calls: it answers "no leader".
    cluster
        .partition("leader", &[0])
        .map_err(|e| e.to_string())?;
    let mut watcher_view = cluster.net_lockers();
    watcher_view[2] = slow_reads(watcher_view[2].clone(), Duration::from_millis(300));
    let watcher = owned_client(watcher_view, "watcher", seed)?;
    let mut observer = observer_of(&watcher, "jobs")?;
    let first = observer.recv().await;
    if first != Some(None) {
        return Err(format!("first item {first:?}, expected no leader"));
    }
    let leader = owned_client(cluster.net_lockers(), "leader", seed + 1000)?;
    let mut leading = leader
        .election("jobs")
        .map_err(|e| e.to_string())?
        .campaign(&b"v0"[..])
        .await
        .map_err(|e| format!("did not lead: {e}"))?;
    let term = leading.term();
    let seen = tokio::spawn(async move {
        let mut items = Vec::new();
        let end = Instant::now() + Duration::from_secs(10);
        while let Ok(Some(item)) = tokio::time::timeout_at(end, observer.recv()).await {
            items.push(item.map(|l| (l.term, l.seq)));
        }
        items
    });
    // Leads 10 s, proclaiming a new value every 100 ms.
    for i in 1..100u32 {
        sleep(Duration::from_millis(100)).await;
        leading
            .proclaim(format!("v{i}").into_bytes())
            .await
            .map_err(|e| format!("proclaim {i} failed: {e}"))?;
    }
    let items = seen.await.map_err(|e| e.to_string())?;
    leading.resign().await.map_err(|e| e.to_string())?;
    if items.iter().any(|i| i.is_some_and(|(t, _)| t == term)) {
        Ok(())
    } else {
        Err(format!(
            "the leader of term {term} led 10 s, proclaiming every 100 ms; the observer \
             reported {items:?} in that time"
        ))
    }
}

#[tokio::test(start_paused = true)]
async fn a_leader_proclaiming_every_100_ms_is_reported_while_one_locker_answers_300_ms_late() {
    for seed in 0..4 {
        if let Err(why) = leader_is_reported(seed).await {
            panic!("seed {seed}: {why}");
        }
    }
}

/// The same links, after a hand-over: leader `z` (on every locker) is
/// reported, resigns while `a` waits in line, and `a` leads 10 s,
/// proclaiming every 100 ms. Observers "see the truth": within those
/// 10 s the observer should at least stop naming `z`, whose lock a quorum
/// freed at once.
async fn gone_leader_is_not_the_last_word(seed: u64) -> Result<(), String> {
    let cluster = TestCluster::new(3, seed);
    cluster.partition("a", &[0]).map_err(|e| e.to_string())?;
    let mut watcher_view = cluster.net_lockers();
    watcher_view[2] = slow_reads(watcher_view[2].clone(), Duration::from_millis(300));
    let watcher = owned_client(watcher_view, "watcher", seed)?;
    let mut observer = observer_of(&watcher, "jobs")?;
    let client = |owner: &str, rng: u64| {
        Dsync::builder(cluster.net_lockers())
            .owner(owner)
            .rng_seed(rng)
            .build()
            .map_err(|e| e.to_string())
    };
    let (z, a) = (client("z", seed + 100)?, client("a", seed + 200)?);
    let mut z_leads = z
        .election("jobs")
        .map_err(|e| e.to_string())?
        .campaign(&b"z"[..])
        .await
        .map_err(|e| e.to_string())?;
    let z_term = z_leads.term();
    loop {
        match observer.recv().await {
            Some(Some(l)) if l.term == z_term => break,
            Some(_) => {}
            None => return Err("the observer ended".into()),
        }
    }
    let a_election = a.election("jobs").map_err(|e| e.to_string())?;
    let a_campaign = tokio::spawn(async move { a_election.campaign(&b"a0"[..]).await });
    sleep(Duration::from_millis(500)).await;
    z_leads.resign().await.map_err(|e| e.to_string())?;
    let mut a_leads = a_campaign
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("a did not lead: {e}"))?;
    let end = Instant::now() + Duration::from_secs(10);
    let mut i = 1u32;
    while Instant::now() < end {
        sleep(Duration::from_millis(100)).await;
        a_leads
            .proclaim(format!("a{i}").into_bytes())
            .await
            .map_err(|e| format!("proclaim {i} failed: {e}"))?;
        i += 1;
    }
    let mut items = Vec::new();
    while let Ok(Some(item)) = tokio::time::timeout(Duration::ZERO, observer.recv()).await {
        items.push(item.map(|l| (l.term, l.seq)));
    }
    a_leads.resign().await.map_err(|e| e.to_string())?;
    if items.is_empty() {
        Err(format!(
            "leader z (term {z_term}) resigned and a (term {}) led 10 s after it; the \
             observer's last word is still z: nothing was reported after it",
            a_leads.term()
        ))
    } else {
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn an_observer_stops_naming_a_resigned_leader_while_the_next_proclaims_every_100_ms() {
    for seed in 0..4 {
        if let Err(why) = gone_leader_is_not_the_last_word(seed).await {
            panic!("seed {seed}: {why}");
        }
    }
}
