//! Reproduces a past break: a client with the ordinary token sends refreshes, under uids nobody holds, of 1,000 names that the same few hundred readers share, pipelined over a few connections; each refresh makes the server pass over every reader of every name three times with all 64 shards locked, so other clients' calls wait for seconds.
//!
//! docs/lock-servers.md, "A compromised client": a client "can take locks
//! and places in line on any name", "can fill limits, each of which bounds
//! it" (per connection 64 MiB of table, in total 1 GiB), and must not make
//! the server stall. A refresh goes to `Session::refresh`
//! (src/net/requests.rs): for a uid the ledger does not charge for these
//! names it asks `LocalLocker::holds_any`, then the locker's `refresh`,
//! then `holds_any` again (src/local/server_queries.rs,
//! src/local/table.rs `Shard::refresh`/`holds_any`): each a linear search
//! of every name's holders for the uid, with every shard that the names
//! touch locked at once. A request of 1,000 names each held by
//! the same 800 readers costs 2.4 million comparisons of uids, though it
//! refreshes and charges nothing; the request is a few KiB, and a
//! connection's batch of pipelined requests runs without yielding its
//! thread. That is the cost of a whole table's walk per call, the same as
//! a force by uid alone, which the server does one at a time off the
//! threads that serve clients; a refresh gets no such care.
//!
//! The table holds 800 read locks of the same 1,000 short names (made on
//! the table itself, as thirteen connections' locks would make them, at
//! most 64 MiB of table each, about 1 MB a lock: about 800 MB in all,
//! within the 1 GiB), and the server runs on a runtime of two worker
//! threads (as `quorum-lock server` on a two-core machine). One refresh of
//! the 1,000 names under a uid nobody holds takes 35 ms on the debug
//! build. Eight connections then each send 32 such refreshes at once,
//! while another client locks and unlocks a free name every 10 ms: the
//! slowest answers after 4.5 to 9 s. With 5 readers instead of 800 (a
//! refresh then takes 3 ms), the same flood's slowest answers after
//! 0.3 s.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use quorum_lock::{LocalLocker, LockArgs, NetLocker};

use crate::args;

const NAMES: usize = 1000;
const READERS: usize = 800;
const ATTACKERS: usize = 8;
const PIPELINED: usize = 32;

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

    let attack = {
        let names = names.clone();
        tokio::spawn(async move {
            let rounds = attackers.iter().enumerate().map(|(a, attacker)| {
                let (attacker, names) = (attacker.clone(), names.clone());
                async move {
                    let calls = (0..PIPELINED).map(|i| {
                        let (attacker, names) = (attacker.clone(), names.clone());
                        async move {
                            let refresh = LockArgs {
                                resources: names,
                                ..args(&uid("refresh", a * PIPELINED + i))
                            };
                            attacker.refresh(&refresh).await
                        }
                    });
                    join_all(calls).await
                }
            });
            join_all(rounds).await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let free = |i: usize| LockArgs {
        resources: vec!["free".to_owned()].into(),
        ..args(&format!("probe-{i:04}-0000-0000-000000000000"))
    };
    let mut slowest = Duration::ZERO;
    let mut i = 0;
    while !attack.is_finished() && i < 1000 {
        let started = Instant::now();
        let locked = probe.lock(&free(i)).await;
        let unlocked = probe.unlock(&free(i)).await;
        slowest = slowest.max(started.elapsed());
        assert_eq!((locked, unlocked), (Ok(true), Ok(true)), "control");
        tokio::time::sleep(Duration::from_millis(10)).await;
        i += 1;
    }
    let answers = attack.await.expect("the attack's task");
    let refused = answers
        .iter()
        .flatten()
        .filter(|r| **r != Ok(false))
        .count();
    eprintln!("slowest probe {slowest:?}; {refused} refreshes answered other than Ok(false)");
    drop(server);
    assert!(
        slowest < Duration::from_secs(2),
        "while {ATTACKERS} connections each sent {PIPELINED} refreshes of {NAMES} names under \
         uids nobody holds (the same {READERS} read locks, taken with the ordinary token within \
         its limits, hold every one of the names), a lock and unlock of a free name answered \
         after {slowest:?}: the server stalled searching every name's readers for each \
         refresh's uid"
    );
}
