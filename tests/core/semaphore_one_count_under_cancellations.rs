//! Clients that all open a semaphore with one count are never told
//! `PermitsMismatch`, whatever their acquires leave behind when they are
//! dropped at any point (during the line, the count check, a read-out or
//! a slot wait) while replies are lost and links are cut; and a client
//! with another count is told `PermitsMismatch` once it is at the head of
//! the line.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error, SemaphorePermit};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::{sleep, timeout, Instant};

const K: usize = 3;
const CLIENTS: usize = 6;

fn client(cluster: &TestCluster, owner: &str, seed: u64) -> Dsync {
    common::seeded(cluster.net_lockers(), owner, seed)
}

fn ms(range: std::ops::Range<u64>, rng: &mut SmallRng) -> Duration {
    Duration::from_millis(rng.random_range(range))
}

#[derive(Default)]
struct Seen {
    mismatches: Vec<String>,
    other_errors: Vec<String>,
    granted: usize,
    dropped: usize,
    /// Slots believed held now, per slot: more than one is two holders.
    held: Vec<usize>,
    double: Vec<String>,
}

async fn hold(permit: SemaphorePermit, seen: &Mutex<Seen>, rng: &mut SmallRng) {
    let slots = permit.slots();
    {
        let mut s = seen.lock().unwrap();
        s.granted += 1;
        for &slot in &slots {
            s.held[slot] += 1;
            if s.held[slot] > 1 {
                let at = Instant::now();
                s.double.push(format!("slot {slot} held twice at {at:?}"));
            }
        }
    }
    let work = ms(0..3_000, rng);
    tokio::select! {
        () = sleep(work) => {}
        () = permit.lost() => {}
    }
    {
        let mut s = seen.lock().unwrap();
        for &slot in &slots {
            s.held[slot] -= 1;
        }
    }
    if rng.random_bool(0.5) {
        let _ = permit.unlock().await;
    } else {
        drop(permit);
    }
}

fn note(seen: &Mutex<Seen>, who: &str, err: Error) {
    let mut s = seen.lock().unwrap();
    match err {
        Error::PermitsMismatch { .. } => s.mismatches.push(format!("{who}: {err:?}")),
        Error::Timeout
        | Error::WouldBlock
        | Error::QuorumUnavailable { .. }
        | Error::Quarantined { .. } => {}
        err => s.other_errors.push(format!("{who}: {err}")),
    }
}

async fn worker(id: usize, ds: Dsync, seed: u64, ops: Arc<AtomicUsize>, seen: Arc<Mutex<Seen>>) {
    let who = format!("client-{id}");
    let mut rng = SmallRng::seed_from_u64(seed ^ ((id as u64 + 1) * 0x9e37_79b9));
    let sem = ds.semaphore("pool", K).unwrap();
    while ops
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        match rng.random_range(0..5) {
            // Dropped at a random point of its acquire.
            0 | 1 => {
                let s2 = sem.clone();
                let many = rng.random_bool(0.3);
                let task = tokio::spawn(async move {
                    if many {
                        s2.acquire_many(2).await
                    } else {
                        s2.acquire().await
                    }
                });
                sleep(ms(0..400, &mut rng)).await;
                task.abort();
                match task.await {
                    Ok(Ok(permit)) => hold(permit, &seen, &mut rng).await,
                    Ok(Err(err)) => note(&seen, &who, err),
                    Err(_) => seen.lock().unwrap().dropped += 1,
                }
            }
            2 => match sem.try_acquire().await {
                Ok(permit) => hold(permit, &seen, &mut rng).await,
                Err(err) => note(&seen, &who, err),
            },
            _ => match sem.acquire_timeout(ms(100..20_000, &mut rng)).await {
                Ok(permit) => hold(permit, &seen, &mut rng).await,
                Err(err) => note(&seen, &who, err),
            },
        }
        sleep(ms(0..500, &mut rng)).await;
    }
}

/// Cuts a random client from a random node now and then, and makes
/// nodes lose replies (applied), so that releases miss lockers.
async fn faults(cluster: Arc<TestCluster>, seed: u64, ops: Arc<AtomicUsize>) {
    let mut rng = SmallRng::seed_from_u64(seed);
    while ops.load(Ordering::SeqCst) > 0 {
        let node = rng.random_range(0..3);
        let owner = format!("client-{}", rng.random_range(0..CLIENTS));
        match rng.random_range(0..3) {
            0 => {
                cluster.partition(&owner, &[node]).unwrap();
                sleep(ms(50..3_000, &mut rng)).await;
                cluster.heal_partition(&owner, &[node]).unwrap();
            }
            1 => {
                cluster.drop_replies(0.5, true, &[node]).unwrap();
                sleep(ms(50..2_000, &mut rng)).await;
                cluster.drop_replies(0.0, true, &[node]).unwrap();
            }
            _ => {
                cluster
                    .set_latency(
                        Latency::Uniform {
                            min: Duration::ZERO,
                            max: Duration::from_millis(300),
                        },
                        &[node],
                    )
                    .unwrap();
                sleep(ms(50..3_000, &mut rng)).await;
                cluster.set_latency(Latency::None, &[node]).unwrap();
            }
        }
        sleep(ms(0..1_000, &mut rng)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn one_count_is_never_told_permits_mismatch_whatever_dropped_acquires_leave() {
    let seeds: Vec<u64> = match std::env::var("SEM_CANCEL_SEED") {
        Ok(s) => vec![s.parse().expect("a seed")],
        Err(_) => {
            let n = std::env::var("SEM_CANCEL_SEEDS").map_or(6, |n| n.parse().expect("a count"));
            (1..=n).collect()
        }
    };
    for seed in seeds {
        let cluster = Arc::new(TestCluster::new(3, seed));
        let ops = Arc::new(AtomicUsize::new(400));
        let seen = Arc::new(Mutex::new(Seen {
            held: vec![0; K],
            ..Seen::default()
        }));
        let mut tasks = Vec::new();
        for id in 0..CLIENTS {
            let ds = client(&cluster, &format!("client-{id}"), seed * 100 + id as u64);
            tasks.push(tokio::spawn(worker(
                id,
                ds,
                seed,
                ops.clone(),
                seen.clone(),
            )));
        }
        let injector = tokio::spawn(faults(cluster.clone(), seed, ops.clone()));
        for t in tasks {
            timeout(Duration::from_secs(3_600), t)
                .await
                .expect("the clients finish")
                .unwrap();
        }
        injector.abort();
        let s = seen.lock().unwrap();
        assert!(
            s.mismatches.is_empty() && s.double.is_empty() && s.other_errors.is_empty(),
            "seed {seed} (SEM_CANCEL_SEED={seed}): {} granted, {} dropped; mismatches: {:?}; \
             double holders: {:?}; other errors: {:?}",
            s.granted,
            s.dropped,
            s.mismatches,
            s.double,
            s.other_errors
        );
        assert!(s.granted > 50, "seed {seed}: only {} granted", s.granted);
        eprintln!(
            "seed {seed}: {} granted, {} dropped while acquiring",
            s.granted, s.dropped
        );
    }
}

/// A client with another count, at the head of the line while a holder of
/// the first count holds one permit of two, is told `PermitsMismatch` at
/// once, and after a client of the first count that waited ahead of it
/// was served.
#[tokio::test(start_paused = true)]
async fn another_count_is_told_permits_mismatch_at_the_head_of_the_line() {
    let cluster = Arc::new(TestCluster::new(3, 3));
    let (a, b, c) = (
        client(&cluster, "a", 1),
        client(&cluster, "b", 2),
        client(&cluster, "c", 3),
    );
    let two = a.semaphore("pool", 2).unwrap();
    let first = two.acquire().await.unwrap();
    let started = Instant::now();
    let three = c.semaphore("pool", 3).unwrap();
    match three.acquire_timeout(Duration::from_secs(30)).await {
        Err(Error::PermitsMismatch { in_use, .. }) => assert_eq!(in_use, Some(2)),
        other => panic!("another count at the head of the line: {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );

    // Both permits held and one more of count 2 waiting ahead.
    let second = two.acquire().await.unwrap();
    let waiting = tokio::spawn({
        let two = b.semaphore("pool", 2).unwrap();
        async move { two.acquire().await }
    });
    sleep(Duration::from_millis(200)).await;
    let late = tokio::spawn(async move { three.acquire().await });
    sleep(Duration::from_secs(3)).await;
    drop(first);
    let served = waiting.await.unwrap().unwrap();
    let told = timeout(Duration::from_secs(10), late)
        .await
        .expect("told once at the head of the line")
        .unwrap();
    assert!(
        matches!(told, Err(Error::PermitsMismatch { .. })),
        "{told:?}"
    );
    drop((served, second));
}
