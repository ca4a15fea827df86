//! Reproduces a past break: a client with the ordinary token has 480 readers each hold the same 1,000 names, then waits for a write lock of those names with an older ticket; the server wounds every reader once per name, half a million pushes per request, and each request holds a server thread for about 2 s.
//!
//! docs/lock-servers.md, "A compromised client": a client "can take locks
//! and places in line on any name ... as any lock holder can", can fill
//! limits, "each of which bounds it" (1000 names per request, 64 MiB of
//! table per connection, 1 GiB in all), and must not make the server
//! stall. A request naming one resource twice is now refused because each
//! copy "would cost the server another pass over that name's holders"
//! ("Limits and memory"); but distinct names held by the same readers cost
//! the same: `LocalLocker::grant_or_queue` (src/local/waiting.rs) runs
//! `Shard::enqueue` for each name, and each calls `wound_younger`
//! (src/local/table.rs) over that name's holders, so one request builds a
//! `Wounded` notice per reader per name (480,000 here, for 480 uids), and
//! delivers them one by one to the readers' connections, whose push
//! queues overflow at once (each dropped push masks its uid for a debug
//! line).
//!
//! 480 readers (on 8 connections, 60 each, about 57 MiB of charge per
//! connection) each wait to read the same 1,000 names and are granted.
//! The hostile waiter drew its ticket before theirs and waits for a write
//! lock of the 1,000 names: each such request answers after about 1.8 s
//! on the debug build (the same scene on the table itself, with pushes
//! that do nothing, 54 ms). It asks 4 times at once over each of two
//! connections (as a waiter may ask again), while another client locks
//! and unlocks a free name every 10 ms: the slowest answers after about
//! 20 s. With a ticket younger than the readers' (no wounds), the same
//! scene's slowest answers after 22 ms.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use quorum_lock::{LocalLocker, LockArgs, LockMode, NetLocker, Ticket, WaitArgs, WaitReply};

use crate::args;
use crate::capped::bounded;

/// Reader connections, and readers on each (about 1 MB of charge each).
const CONNECTIONS: usize = 8;
const READERS: usize = 60;

/// Hostile connections, and the requests each sends at once.
const HOSTILE: usize = 2;
const PIPELINED: usize = 4;

fn wait(ticket: Ticket) -> WaitArgs {
    WaitArgs {
        ticket,
        place_ttl: Duration::from_secs(60),
        wake: Some(crate::ignored()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    debug_assertions,
    ignore = "times a loaded server: run optimized, `cargo test --release --all-features --test server_stalls` (CI does)"
)]
async fn an_older_wait_on_names_the_same_readers_share_does_not_stall_the_server() {
    let _one_at_a_time = crate::HEAVY.lock().await;
    let locker = Arc::new(LocalLocker::new());
    let server = crate::TwoThreads::serve(locker.clone()).await;
    let _addr = server.addr.clone();
    // Calls that may take minutes, so that the stall is timed whole.
    let connect = || server.patient(Duration::from_secs(120));

    let names: Vec<String> = (0..1000).map(|k| format!("n-{k:03}")).collect();
    // Older than every reader's.
    let hostile_ticket = Ticket::now();
    let mut readers = Vec::new();
    for c in 0..CONNECTIONS {
        let connection = connect().await;
        for i in 0..READERS {
            let reader = LockArgs {
                resources: names.clone().into(),
                ..args(&format!("reader-{c:02}-{i:04}-0000-000000000000"))
            };
            assert_eq!(
                bounded(
                    "a reader's wait",
                    connection.lock_wait(&reader, LockMode::Read, &wait(Ticket::now()))
                )
                .await,
                Ok(WaitReply::Granted),
                "control: the readers share the names"
            );
        }
        readers.push(connection);
    }
    let probe = connect().await;
    let free = |i: usize| LockArgs {
        resources: vec!["free".to_owned()].into(),
        ..args(&format!("probe-{i:04}-0000-0000-000000000000"))
    };
    assert_eq!(probe.lock(&free(0)).await, Ok(true), "control");
    assert_eq!(probe.unlock(&free(0)).await, Ok(true), "control");

    let writer = LockArgs {
        resources: names.into(),
        ..args("hostile-0000-0000-0000-000000000000")
    };
    let mut hostile = Vec::new();
    for _ in 0..HOSTILE {
        hostile.push(Arc::new(connect().await));
    }
    let attack = tokio::spawn(async move {
        let asked = wait(hostile_ticket);
        let calls = hostile.iter().flat_map(|connection| {
            (0..PIPELINED).map(|_| connection.lock_wait(&writer, LockMode::Write, &asked))
        });
        join_all(calls).await
    });
    let slowest = crate::slowest_probe_while(&probe, &attack).await;
    let answers = attack.await.expect("the hostile calls' task");
    eprintln!("slowest probe {slowest:?}");
    drop(readers);
    drop(server);
    assert!(
        answers.iter().all(|a| *a == Ok(WaitReply::Queued)),
        "control: the hostile waiter waits: {answers:?}"
    );
    assert!(
        slowest < crate::STALL_BAR,
        "while a waiter with an older ticket asked {PIPELINED} times at once over each of \
         {HOSTILE} connections for a write lock of 1,000 names that the same {} readers hold \
         (all taken with the ordinary token within its limits), a lock and unlock of a free \
         name answered after {slowest:?}: the server stalled wounding each reader once per name",
        CONNECTIONS * READERS
    );
}
