//! An observer while every locker answers after a random latency (nothing
//! frozen, no push lost) and leaders follow each other faster than the
//! observer's re-check. docs/election.md promises that a leadership that
//! lasts longer than two reads (a read takes as long as the slowest locker
//! of a write quorum takes to answer) is reported: here leaderships of
//! 250 ms, lockers that answer within 100 ms.
//!
//! A review first tried lockers that answer within 200 ms, more than half
//! a leadership: then the observer missed one or two leaders of eight at
//! some seeds, as the docs now say it may. A read that the change of
//! leader cuts short starts again at the next push, which can come a read
//! after the new leader took a quorum.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::Dsync;
use tokio::time::{sleep, Instant};

const LEADS_FOR: Duration = Duration::from_millis(250);
const LATENCY: Duration = Duration::from_millis(100);
const LEADERS: usize = 8;

async fn every_leader_is_reported(seed: u64) -> Result<(), String> {
    let cluster = TestCluster::new(3, seed);
    cluster
        .set_latency(
            Latency::Uniform {
                min: Duration::ZERO,
                max: LATENCY,
            },
            &[0, 1, 2],
        )
        .map_err(|e| e.to_string())?;
    let watcher = Dsync::builder(cluster.net_lockers())
        .owner("watcher")
        .rng_seed(seed)
        .build()
        .map_err(|e| e.to_string())?;
    let mut observer = watcher
        .election("jobs")
        .map_err(|e| e.to_string())?
        .observe()
        .map_err(|e| e.to_string())?;
    // Nobody leads yet: the observer has read the lockers once.
    if observer.recv().await != Some(None) {
        return Err("the first item was not \"no leader\"".into());
    }
    let seen = tokio::spawn(async move {
        let mut terms = Vec::new();
        let end = Instant::now() + Duration::from_secs(30);
        while let Ok(Some(item)) = tokio::time::timeout_at(end, observer.recv()).await {
            if let Some(leader) = item {
                terms.push(leader.term);
            }
        }
        terms
    });
    let mut led = Vec::new();
    for i in 0..LEADERS {
        let client = Dsync::builder(cluster.net_lockers())
            .owner(format!("candidate-{i}"))
            .rng_seed(seed * 100 + i as u64)
            .build()
            .map_err(|e| e.to_string())?;
        let mut leading = client
            .election("jobs")
            .map_err(|e| e.to_string())?
            .campaign(format!("c{i}").into_bytes())
            .await
            .map_err(|e| format!("candidate {i} did not lead: {e}"))?;
        led.push(leading.term());
        sleep(LEADS_FOR).await;
        leading
            .resign()
            .await
            .map_err(|e| format!("candidate {i} could not resign: {e}"))?;
    }
    let seen = seen.await.map_err(|e| e.to_string())?;
    let missed: Vec<usize> = (0..LEADERS).filter(|&i| !seen.contains(&led[i])).collect();
    if missed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{LEADERS} candidates each led {LEADS_FOR:?} in turn, every locker answering within \
             {LATENCY:?}; the observer never reported candidates {missed:?} (terms led: {led:?}, \
             reported: {seen:?})"
        ))
    }
}

#[tokio::test(start_paused = true)]
async fn leaderships_longer_than_two_reads_are_reported_when_every_link_is_slow() {
    let mut failures = Vec::new();
    for seed in 0..64 {
        if let Err(why) = every_leader_is_reported(seed).await {
            failures.push(format!("seed {seed}: {why}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
