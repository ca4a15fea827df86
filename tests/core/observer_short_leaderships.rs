//! An observer while leaders follow each other faster than its re-check.
//! docs/election.md: a leadership that lasts longer than two reads (a
//! read takes as long as the slowest locker of the quickest write quorum
//! takes to answer) is reported, unless its pushes were lost.
//!
//! * One locker of three frozen (a stopped process: calls to it neither
//!   fail nor answer). A read that a push could not cut waited for the
//!   frozen locker whenever the two live lockers answered in the middle of
//!   a hand-over, so it ran until the re-check and a leadership of a few
//!   hundred milliseconds passed unseen (seen in CI as `elect --listen`
//!   never printing the third leader).
//! * Every locker slow. A review first tried lockers that answer within
//!   200 ms, more than half a leadership: then the observer missed one or
//!   two leaders of eight at some seeds, as the docs now say it may (a
//!   read that the change of leader cuts short starts again at the next
//!   push, which can come a read after the new leader took a quorum).
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common::{observer_of, owned_client};
use quorum_lock::testing::{Latency, TestCluster};
use tokio::time::{sleep, Instant};

/// How long each leader leads: a quarter of the default re-check (1 s).
const LEADS_FOR: Duration = Duration::from_millis(250);
const LEADERS: usize = 8;

/// The lockers of a three-locker cluster: `slow` answer within `latency`,
/// `frozen` never answer.
struct Links {
    slow: &'static [usize],
    latency: Duration,
    frozen: &'static [usize],
}

async fn every_leader_is_reported(seed: u64, links: &Links) -> Result<(), String> {
    let cluster = TestCluster::new(3, seed);
    cluster
        .set_latency(
            Latency::Uniform {
                min: Duration::ZERO,
                max: links.latency,
            },
            links.slow,
        )
        .map_err(|e| e.to_string())?;
    cluster
        .set_hang(true, links.frozen)
        .map_err(|e| e.to_string())?;
    let watcher = owned_client(cluster.net_lockers(), "watcher", seed)?;
    let mut observer = observer_of(&watcher, "jobs")?;
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
        let client = owned_client(
            cluster.net_lockers(),
            format!("candidate-{i}"),
            seed * 100 + i as u64,
        )?;
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
            "{LEADERS} candidates each led {LEADS_FOR:?} in turn; the observer never reported \
             candidates {missed:?} (terms led: {led:?}, reported: {seen:?})"
        ))
    }
}

async fn every_leader_is_reported_at_every_seed(seeds: u64, links: Links) {
    let mut failures = Vec::new();
    for seed in 0..seeds {
        if let Err(why) = every_leader_is_reported(seed, &links).await {
            failures.push(format!("seed {seed}: {why}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(start_paused = true)]
async fn leaderships_shorter_than_the_recheck_are_reported_while_a_locker_is_frozen() {
    // The live lockers answer within 40 ms, so hand-overs are seen half
    // done.
    let links = Links {
        slow: &[0, 1],
        latency: Duration::from_millis(40),
        frozen: &[2],
    };
    every_leader_is_reported_at_every_seed(16, links).await;
}

#[tokio::test(start_paused = true)]
async fn leaderships_longer_than_two_reads_are_reported_when_every_link_is_slow() {
    let links = Links {
        slow: &[0, 1, 2],
        latency: Duration::from_millis(100),
        frozen: &[],
    };
    every_leader_is_reported_at_every_seed(64, links).await;
}
