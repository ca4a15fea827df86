//! Reproduces a past break: a client with the ordinary token waits for 1,000 held names in whose lines 500 waiters each stand, and asks again and again; each request passes over every place of every line, twice, with all 64 shards locked, so other clients' calls wait for seconds.
//!
//! docs/lock-servers.md, "A compromised client": a client "can take locks
//! and places in line on any name", "can fill limits, each of which bounds
//! it" (1024 places per connection, 1 GiB of table), and must not make the
//! server stall; a waiter may ask again ("Limits and memory": it keeps the
//! places of its newest request). `LocalLocker::grant_or_queue`
//! (src/local/waiting.rs) asks `Shard::superseded` for each name, a pass
//! over its whole line, then `Shard::enqueue` (src/local/table.rs), which
//! filters the whole line again, all with every shard of the names locked.
//! One request of 1,000 names over lines of 500 places costs a million
//! place visits, the whole table's worth; it is a few KiB, and a
//! connection's batch of pipelined requests runs without yielding its
//! thread.
//!
//! A writer holds the 1,000 names and 500 waiters (as on 500 connections
//! from enough addresses, one waiter of 1,000 names each within its 1024
//! places; about 500 MB of table, within the 1 GiB) wait to read all of
//! them, made on the table itself. The hostile waiter (a ticket younger
//! than theirs; an older one costs the same) waits to read the 1,000
//! names: one request answers after 20 ms on the debug build. It asks 64
//! times at once over each of eight connections (as a waiter may ask
//! again), while another client locks and unlocks a free name every
//! 10 ms: the slowest answers after 4 to 5.7 s. With 5 waiters in each
//! line instead of 500, the same flood's slowest answers after 0.46 s.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use quorum_lock::{
    LocalLocker, LockArgs, LockMode, NetLocker, PushEvent, PushSink, Ticket, WaitArgs, WaitReply,
    Wake,
};

use crate::args;

const NAMES: usize = 1000;
const WAITERS: usize = 500;
const HOSTILE: usize = 8;
const PIPELINED: usize = 64;

struct Ignore;

impl PushSink for Ignore {
    fn push(&self, _slot: usize, _uid: &str, _event: PushEvent) {}
}

fn wait(ticket: Ticket) -> WaitArgs {
    WaitArgs {
        ticket,
        place_ttl: Duration::from_secs(60),
        wake: Some(Wake::new(Arc::new(Ignore), 0)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    debug_assertions,
    ignore = "times a loaded server: run optimized, `cargo test --release --all-features --test server_stalls` (CI does)"
)]
async fn a_wait_asked_again_on_names_with_long_lines_does_not_stall_the_server() {
    let _one_at_a_time = crate::HEAVY.lock().await;
    let names: Arc<[String]> = (0..NAMES).map(|i| format!("name-{i:04}")).collect();
    let on_names = |uid: &str| LockArgs {
        resources: names.clone(),
        ..args(uid)
    };
    let locker = Arc::new(LocalLocker::new());
    let built = Instant::now();
    assert_eq!(
        locker
            .lock(&on_names("writer-0000-0000-0000-000000000000"))
            .await,
        Ok(true),
        "control"
    );
    for i in 0..WAITERS {
        let waiter = on_names(&format!("{i:08}-0000-0000-0000-000000000000"));
        assert_eq!(
            locker
                .lock_wait(&waiter, LockMode::Read, &wait(Ticket::now()))
                .await,
            Ok(WaitReply::Queued),
            "control"
        );
    }
    eprintln!("built in {:?}", built.elapsed());
    let hostile_ticket = Ticket::now();
    let server = crate::TwoThreads::serve(locker.clone()).await;
    let connect = || server.patient(Duration::from_secs(60));
    let probe = connect().await;
    let mut hostile = Vec::new();
    for _ in 0..HOSTILE {
        hostile.push(Arc::new(connect().await));
    }
    let waiter = on_names("hostile-0000-0000-0000-000000000000");
    let one = Instant::now();
    let asked = hostile[0]
        .lock_wait(&waiter, LockMode::Read, &wait(hostile_ticket))
        .await;
    eprintln!("one request {asked:?} took {:?}", one.elapsed());
    assert_eq!(asked, Ok(WaitReply::Queued), "control");

    let attack = tokio::spawn(async move {
        let asked = wait(hostile_ticket);
        let calls = hostile.iter().enumerate().flat_map(|(h, connection)| {
            let waiter = LockArgs {
                uid: format!("hostile-{h:04}-0000-0000-000000000000").into(),
                ..waiter.clone()
            };
            let asked = asked.clone();
            (0..PIPELINED).map(move |_| {
                let (connection, waiter, asked) =
                    (connection.clone(), waiter.clone(), asked.clone());
                async move { connection.lock_wait(&waiter, LockMode::Read, &asked).await }
            })
        });
        join_all(calls).await
    });
    let slowest = crate::slowest_probe_while(&probe, &attack).await;
    let answers = attack.await.expect("the attack's task");
    let queued = answers
        .iter()
        .filter(|r| **r == Ok(WaitReply::Queued))
        .count();
    eprintln!(
        "slowest probe {slowest:?}; {queued} of {} requests queued",
        answers.len()
    );
    drop(server);
    assert!(
        slowest < crate::STALL_BAR,
        "while a waiter asked {PIPELINED} times at once over each of \
         {HOSTILE} connections for {NAMES} names (held by a writer, with {WAITERS} read waiters \
         in every line, taken with the ordinary token within its limits), a lock and unlock of \
         a free name answered after {slowest:?}: each request passed over every line whole"
    );
}
