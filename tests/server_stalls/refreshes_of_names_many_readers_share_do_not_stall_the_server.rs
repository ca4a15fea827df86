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
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use quorum_lock::net::RemoteLocker;
use quorum_lock::{LocalLocker, LockArgs, NetLocker};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refreshes_of_names_many_readers_share_do_not_stall_the_server() {
    let _one_at_a_time = crate::HEAVY.lock().await;
    let names: Arc<[String]> = (0..NAMES).map(|i| format!("name-{i:04}")).collect();
    let shared = |uid: &str| LockArgs {
        resources: names.clone(),
        ..args(uid)
    };
    let locker = Arc::new(LocalLocker::new());
    let built = Instant::now();
    for i in 0..READERS {
        assert_eq!(
            locker.rlock(&shared(&uid("reader", i))).await,
            Ok(true),
            "control"
        );
    }
    eprintln!("built in {:?}", built.elapsed());
    let server = crate::TwoThreads::serve(locker.clone()).await;
    let connect = || server.patient(Duration::from_secs(60));
    let probe = connect().await;
    let mut attackers = Vec::new();
    for _ in 0..CONNECTIONS {
        attackers.push(Arc::new(connect().await));
    }
    let one = Instant::now();
    let refreshed = probe.refresh(&shared(&uid("nobody", 0))).await;
    eprintln!(
        "one refresh of {NAMES} names {refreshed:?} took {:?}",
        one.elapsed()
    );
    assert_eq!(refreshed, Ok(false), "control: nobody holds the uid");

    // Few connections with many refreshes each, then every connection
    // the address may open with a few each: about 250 refreshes both times.
    for (connections, pipelined) in [(8, 32), (CONNECTIONS, 4)] {
        let attack = tokio::spawn(flood(
            attackers[..connections].to_vec(),
            pipelined,
            names.clone(),
        ));
        let slowest = crate::slowest_probe_while(&probe, &attack).await;
        let answers = attack.await.expect("the attack's task");
        let other = answers.iter().filter(|r| **r != Ok(false)).count();
        eprintln!(
            "{connections} connections: slowest probe {slowest:?}; {other} refreshes answered \
             other than Ok(false)"
        );
        assert_eq!(other, 0, "control: every refresh was served");
        assert!(
            slowest < Duration::from_secs(2),
            "while {connections} connections each sent {pipelined} refreshes of {NAMES} names \
             under uids nobody holds (the same {READERS} read locks, taken with the ordinary token \
             within its limits, hold every one of the names), a lock and unlock of a free name \
             answered after {slowest:?}: the server stalled searching every name's readers for \
             each refresh's uid"
        );
    }
    drop(server);
}

/// Sends `pipelined` refreshes of `names` at once on each of `attackers`,
/// each under a uid of its own that nobody holds; returns their answers.
async fn flood(
    attackers: Vec<Arc<RemoteLocker>>,
    pipelined: usize,
    names: Arc<[String]>,
) -> Vec<Result<bool, quorum_lock::Error>> {
    let calls = attackers.iter().enumerate().flat_map(|(a, attacker)| {
        let names = names.clone();
        (0..pipelined).map(move |i| {
            let refresh = LockArgs {
                resources: names.clone(),
                ..args(&uid("refresh", a * pipelined + i))
            };
            async move { attacker.refresh(&refresh).await }
        })
    });
    join_all(calls).await
}
