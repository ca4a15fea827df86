//! Reproduces a past break: a client with the ordinary token sends refreshes, under uids nobody holds, of 1,000 names that the same few hundred readers share, pipelined over a few connections or spread over the 63 its address may still open; each refresh made the server pass over every reader of every name three times with all 64 shards locked, so other clients' calls waited for seconds.
//!
//! docs/lock-servers.md, "A compromised client": a client "can take locks
//! and places in line on any name", "can fill limits, each of which bounds
//! it" (per IP address 64 client connections, per connection 64 MiB of
//! table, in total 1 GiB), and must not make the server stall. A refresh
//! goes to `Session::refresh` (src/net/requests.rs): for a uid the ledger
//! does not charge for these names it asks `LocalLocker::holds_any`, then
//! the locker's `refresh`, then `holds_any` again, each of which once
//! searched every name's holders for the uid, with every shard the names
//! touch locked: 2.4 million comparisons of uids for a request of a few
//! KiB that refreshes and charges nothing. A name's readers now keep an
//! index by uid once they are many (src/local/table/readers.rs), so each
//! is one lookup per name.
//!
//! The table holds 800 read locks of the same 1,000 short names (made on
//! the table itself, as thirteen connections' locks would make them, at
//! most 64 MiB of table each, about 1 MB a lock: about 800 MB in all,
//! within the 1 GiB), and the server runs on a runtime of two worker
//! threads (as `quorum-lock server` on a two-core machine). Before the
//! index, one refresh of the 1,000 names under a uid nobody holds took
//! 35 ms on the debug build (5 ms after); eight connections each sending
//! 32 such refreshes at once, while another client locked and unlocked a
//! free name every 10 ms, made the slowest of those answer after 1.1 to 9
//! s, and the same number of refreshes over 63 connections, four each
//! (every connection's batch yields after each millisecond of work, but
//! another client's call waited behind one refresh of every connection),
//! after 4.3 to 5.3 s. With 5 readers instead of 800, the slowest
//! answered after 0.13 to 0.3 s.
//!
//! The same table, expiring: see
//! `readers_of_names_many_share_expiring_one_by_one_do_not_stall_the_server` below.
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
/// The probe takes the 64th connection of the address.
const CONNECTIONS: usize = 63;

/// A uid of 128 bytes, the protocol's longest, all sharing one prefix: a
/// comparison of two reads them whole.
fn uid(tag: &str, i: usize) -> String {
    format!("{tag}-{i:08}-{}", "u".repeat(128 - tag.len() - 10))
}

/// A lock of every one of `names` by `uid`.
fn shared(names: &Arc<[String]>, uid: &str) -> LockArgs {
    LockArgs {
        resources: names.clone(),
        ..args(uid)
    }
}

/// What both scenes start from: `READERS` read locks of the same `NAMES`
/// names, taken on the table itself one after another, served by a
/// two-thread server, with a probe client and `attackers` more connected.
struct Scene {
    names: Arc<[String]>,
    /// How long taking the locks took.
    built: Duration,
    /// Serves for as long as the scene lasts.
    _server: crate::TwoThreads,
    probe: RemoteLocker,
    attackers: Vec<Arc<RemoteLocker>>,
}

impl Scene {
    async fn start(locker: Arc<LocalLocker>, attackers: usize) -> Scene {
        let names: Arc<[String]> = (0..NAMES).map(|i| format!("name-{i:04}")).collect();
        let started = Instant::now();
        for i in 0..READERS {
            let taken = locker.rlock(&shared(&names, &uid("reader", i))).await;
            assert_eq!(taken, Ok(true), "control");
        }
        let built = started.elapsed();
        eprintln!("built in {built:?}");
        let server = crate::TwoThreads::serve(locker).await;
        let connect = || server.patient(Duration::from_secs(60));
        let probe = connect().await;
        let mut connected = Vec::new();
        for _ in 0..attackers {
            connected.push(Arc::new(connect().await));
        }
        let one = Instant::now();
        let refreshed = probe.refresh(&shared(&names, &uid("nobody", 0))).await;
        eprintln!(
            "one refresh of {NAMES} names {refreshed:?} took {:?}",
            one.elapsed()
        );
        assert_eq!(refreshed, Ok(false), "control: nobody holds the uid");
        Scene {
            names,
            built,
            _server: server,
            probe,
            attackers: connected,
        }
    }

    /// The slowest of the probe's calls while each of the first
    /// `connections` attackers sends `pipelined` refreshes of the names at
    /// once, under uids nobody holds, round after round for `span` (one
    /// round at least, 1,000 at most); every refresh must be answered
    /// `Ok(false)`. Returns it and the rounds.
    async fn flood(
        &self,
        connections: usize,
        pipelined: usize,
        span: Duration,
    ) -> (Duration, usize) {
        let attackers = self.attackers[..connections].to_vec();
        let names = self.names.clone();
        let attack = tokio::spawn(async move {
            let started = Instant::now();
            let (mut rounds, mut other) = (0, 0);
            while rounds == 0 || (rounds < 1000 && started.elapsed() < span) {
                let calls = attackers.iter().enumerate().flat_map(|(a, attacker)| {
                    let names = names.clone();
                    (0..pipelined).map(move |i| {
                        let refresh = shared(&names, &uid("refresh", a * pipelined + i));
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
        });
        let slowest = crate::slowest_probe_while(&self.probe, &attack).await;
        let (rounds, other) = attack.await.expect("the attack's task");
        eprintln!(
            "{connections} connections, {pipelined} each: slowest probe {slowest:?} in {rounds} \
             rounds"
        );
        assert_eq!(other, 0, "control: every refresh was served");
        (slowest, rounds)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    debug_assertions,
    ignore = "times a loaded server: run optimized, `cargo test --release --all-features --test server_stalls` (CI does)"
)]
async fn refreshes_of_names_many_readers_share_do_not_stall_the_server() {
    let _one_at_a_time = crate::HEAVY.lock().await;
    let scene = Scene::start(Arc::new(LocalLocker::new()), CONNECTIONS).await;
    // Few connections with many refreshes each, then every connection
    // the address may open with a few each: about 250 refreshes both times.
    for (connections, pipelined) in [(8, 32), (CONNECTIONS, 4)] {
        let (slowest, _) = scene.flood(connections, pipelined, Duration::ZERO).await;
        assert!(
            slowest < crate::STALL_BAR,
            "while {connections} connections each sent {pipelined} refreshes of {NAMES} names \
             under uids nobody holds (the same {READERS} read locks, taken with the ordinary token \
             within its limits, hold every one of the names), a lock and unlock of a free name \
             answered after {slowest:?}: the server stalled searching every name's readers for \
             each refresh's uid"
        );
    }
}

/// Reproduces a past break: readers of 1,000 names that the same 800 uids share, left to expire one after another, cost a pass over every remaining reader of each of the 1,000 names at each expiry (a pass that since the readers' index also rebuilds that index), paid by whichever call expires first, and a call naming every name pays it with all 64 shards locked, so another client's call on a free name waits for seconds.
///
/// docs/lock-servers.md, "A compromised client": a client "can take locks
/// and places in line on any name", "can fill limits, each of which bounds
/// it", and must not make the server stall; holding locks "takes
/// refreshing within the validity". "Limits and memory": a refresh of a
/// name many clients read "costs the server no more than one of a name
/// held once". `Shard::expire` (src/local/table.rs)
/// drops a name's expired readers with `Readers::retain`, one pass over
/// the name's readers, which since the readers keep an index by uid once
/// past 32 (src/local/table/readers.rs) also clears the index and hashes
/// and inserts every remaining reader's uid again. Readers that expire
/// one by one (each at its own moment, as readers that stop refreshing
/// one after another do) cost that for every name they held at each
/// expiry, and a call naming every name (here a refresh under a uid
/// nobody holds) expires all 64 shards with all of them locked.
///
/// The table holds 800 read locks of the same 1,000 short names (made on
/// the table itself, as the refresh scene makes them: within the limits,
/// about 800 MB of charges in the 1 GiB table), taken one after another so
/// that each has its own moment of expiry; the locker's clock is then run
/// ahead to just before the first expiry, and back at tokio's rate, so that
/// the readers expire one by one over the time it took to take them. Eight
/// connections meanwhile send refreshes of the 1,000 names under uids
/// nobody holds, while another client locks and unlocks a free name every
/// 10 ms. On the debug build the slowest probe took 3.1 to 5.3 s (one
/// refresh of the 1,000 names alone: 6 ms). Not the index's doing alone:
/// with `retain` dropping the expired readers from the index one by one
/// instead of rebuilding it, the slowest took 2.9 s; with no index at all
/// (as before it), 4.1 s. Stack samples show the time in `Shard::expire`
/// (`Readers::retain` and `Readers::reindex`) under `Session::refresh`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    debug_assertions,
    ignore = "times a loaded server: run optimized, `cargo test --release --all-features --test server_stalls` (CI does)"
)]
async fn readers_of_names_many_share_expiring_one_by_one_do_not_stall_the_server() {
    /// Long enough for the table to be built before anything expires.
    const VALIDITY: Duration = Duration::from_secs(60);
    let _one_at_a_time = crate::HEAVY.lock().await;
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
    let scene = Scene::start(locker, 8).await;

    // Run the clock ahead to just before the first reader expires, then at
    // tokio's rate again: the readers expire one by one over the time it
    // took to take them. Fast at first, then slower, so as not to
    // overshoot: a step of 1 ms at 1000 times tokio's rate is a second of
    // the clock, in which a quarter of the readers would expire together.
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

    let (slowest, _) = scene.flood(8, 4, scene.built).await;
    assert!(
        slowest < crate::STALL_BAR,
        "while {READERS} readers of the same {NAMES} names (taken with the ordinary token within \
         its limits) expired one after another and 8 connections refreshed those names under \
         uids nobody holds, a lock and unlock of a free name answered after {slowest:?}: the \
         server stalled passing over every name's readers at each expiry"
    );
}
