//! Reproduces a past break: readers of 1,000 names that the same 800 uids share, left to expire one after another, cost a pass over every remaining reader of each of the 1,000 names at each expiry (a pass that since the readers' index also rebuilds that index), paid by whichever call expires first, and a call naming every name pays it with all 64 shards locked, so another client's call on a free name waits for seconds.
//!
//! docs/lock-servers.md, "A compromised client": a client "can take locks
//! and places in line on any name", "can fill limits, each of which bounds
//! it", and must not make the server stall; holding locks "takes
//! refreshing within the validity". "Limits and memory": a refresh of a
//! name many clients read "costs the server no more than one of a name
//! held once". `Shard::expire` (src/local/table.rs)
//! drops a name's expired readers with `Readers::retain`, one pass over
//! the name's readers, which since the readers keep an index by uid once
//! past 32 (src/local/table/readers.rs) also clears the index and hashes
//! and inserts every remaining reader's uid again. Readers that expire
//! one by one (each at its own moment, as readers that stop refreshing
//! one after another do) cost that for every name they held at each
//! expiry, and a call naming every name (here a refresh under a uid
//! nobody holds) expires all 64 shards with all of them locked.
//!
//! The table holds 800 read locks of the same 1,000 short names (made on
//! the table itself, as the refresh scene makes them: within the limits,
//! about 800 MB of charges in the 1 GiB table), taken one after another so
//! that each has its own moment of expiry; the locker's clock is then run
//! ahead to just before the first expiry, and back at tokio's rate, so that
//! the readers expire one by one over the time it took to take them. Eight
//! connections meanwhile send refreshes of the 1,000 names under uids
//! nobody holds, while another client locks and unlocks a free name every
//! 10 ms. On the debug build the slowest probe took 3.1 to 5.3 s (one
//! refresh of the 1,000 names alone: 6 ms). Not the index's doing alone:
//! with `retain` dropping the expired readers from the index one by one
//! instead of rebuilding it, the slowest took 2.9 s; with no index at all
//! (as before it), 4.1 s. Stack samples show the time in `Shard::expire`
//! (`Readers::retain` and `Readers::reindex`) under `Session::refresh`.
#![cfg(all(feature = "net", feature = "testing"))]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use quorum_lock::net::RemoteLocker;
use quorum_lock::testing::DriftClock;
use quorum_lock::{LocalLocker, LockArgs, LockerConfig, NetLocker};

use crate::args;

const NAMES: usize = 1000;
const READERS: usize = 800;
const ATTACKERS: usize = 8;
const VALIDITY: Duration = Duration::from_secs(60);

/// A uid of 128 bytes, the protocol's longest.
fn uid(tag: &str, i: usize) -> String {
    format!("{tag}-{i:08}-{}", "u".repeat(128 - tag.len() - 10))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_of_names_many_share_expiring_one_by_one_do_not_stall_the_server() {
    let _one_at_a_time = crate::HEAVY.lock().await;
    let names: Arc<[String]> = (0..NAMES).map(|i| format!("name-{i:04}")).collect();
    let shared = |uid: &str| LockArgs {
        resources: names.clone(),
        ..args(uid)
    };
    let clock = DriftClock::new();
    let locker = Arc::new(LocalLocker::with_clock(
        "node",
        LockerConfig {
            validity: VALIDITY,
            quarantine: Duration::ZERO,
        },
        clock.clone(),
    ));
    let first = clock.now();
    let built = Instant::now();
    for i in 0..READERS {
        assert_eq!(
            locker.rlock(&shared(&uid("reader", i))).await,
            Ok(true),
            "control"
        );
    }
    let span = built.elapsed();
    eprintln!("built in {span:?}");
    let server = crate::TwoThreads::serve(locker.clone()).await;
    let connect = || server.patient(Duration::from_secs(60));
    let probe = connect().await;
    let mut attackers = Vec::new();
    for _ in 0..ATTACKERS {
        attackers.push(Arc::new(connect().await));
    }
    let one = Instant::now();
    let refreshed = probe.refresh(&shared(&uid("nobody", 0))).await;
    eprintln!(
        "one refresh of {NAMES} names {refreshed:?} took {:?}",
        one.elapsed()
    );
    assert_eq!(refreshed, Ok(false), "control: nobody holds the uid");

    // Run the clock ahead to just before the first reader expires, then at
    // tokio's rate again: the readers expire one by one over `span`.
    // Fast at first, then slower, so as not to overshoot: a step of 1 ms
    // at 1000 times tokio's rate is a second of the clock, in which a
    // quarter of the readers would expire together.
    for (rate, until) in [
        (1000.0, Duration::from_secs(3)),
        (10.0, Duration::from_millis(100)),
    ] {
        clock.set_rate(rate).expect("a rate");
        for _ in 0..10_000 {
            if clock.now() + until >= first + VALIDITY {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    clock.set_rate(1.0).expect("a rate");
    assert!(
        clock.now() < first + VALIDITY,
        "control: no reader expired yet"
    );

    let attack = tokio::spawn(flood(attackers, names.clone(), span));
    let slowest = crate::slowest_probe_while(&probe, &attack).await;
    let (rounds, other) = attack.await.expect("the attack's task");
    eprintln!("slowest probe {slowest:?}; {rounds} rounds; {other} refreshes not Ok(false)");
    assert_eq!(other, 0, "control: every refresh was served");
    assert!(
        slowest < Duration::from_secs(2),
        "while {READERS} readers of the same {NAMES} names (taken with the ordinary token within \
         its limits) expired one after another and {ATTACKERS} connections refreshed those names \
         under uids nobody holds, a lock and unlock of a free name answered after {slowest:?}: \
         the server stalled rebuilding every name's index of readers at each expiry"
    );
    drop(server);
}

/// Refreshes of `names` under uids nobody holds, four at once on each of
/// `attackers`, round after round for `span` (at most 1,000 rounds);
/// returns the rounds and how many answers were other than `Ok(false)`.
async fn flood(
    attackers: Vec<Arc<RemoteLocker>>,
    names: Arc<[String]>,
    span: Duration,
) -> (usize, usize) {
    let started = Instant::now();
    let mut other = 0;
    let mut rounds = 0;
    while rounds < 1000 && started.elapsed() < span {
        let calls = attackers.iter().enumerate().flat_map(|(a, attacker)| {
            let names = names.clone();
            (0..4).map(move |i| {
                let refresh = LockArgs {
                    resources: names.clone(),
                    ..args(&uid("refresh", a * 4 + i))
                };
                async move { attacker.refresh(&refresh).await }
            })
        });
        other += join_all(calls)
            .await
            .iter()
            .filter(|r| **r != Ok(false))
            .count();
        rounds += 1;
    }
    (rounds, other)
}
