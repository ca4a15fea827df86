//! Reproduces a past break: a client with the ordinary token holds a write lock on 999 names and waits, under other uids, to read them and one more name it cannot have yet; the writer's release tries the same waiters once per name it frees, each time from scratch (their every name, and a view of the blocking name's whole line and every holder of it), so the release stalls for seconds.
//!
//! docs/lock-servers.md, "A compromised client": a client "can take locks
//! and places in line on any name ... as any lock holder can", can fill
//! limits, "each of which bounds it" (at most 1000 names per request, 1024
//! places per connection, 64 connections per address, about 28,000 read
//! locks of one short name per connection), and must not make the server
//! stall. `LocalLocker::promote` (src/local/promotion.rs) runs
//! `grant_spanning` once for each name the release frees whose line has
//! waiters of several names at its head; each run indexes every name of
//! those waiters (cloning them and locking their shards, here all 64),
//! maps each waiter's names, and builds `Shard::line`
//! (src/local/table/spanning.rs) for each name it tries: a flag per place
//! in its line and a set of every holder's uid. Waiters that another name
//! keeps waiting stay at the head of every freed line, so one release of
//! 999 names does that 999 times: 999 x the waiters' names, and 999 x the
//! blocking name's readers.
//!
//! In both scenes a client holds a write lock on 999 names `y-…`, and
//! waiters (other uids) wait to read `x` and the 999 names; something on
//! `x` keeps them in line there. The client then unlocks the 999 names.
//! - `x` has 20,000 readers (made on the table itself, as one connection's
//!   read locks would make them, within its 64 MiB) and a writer waiting
//!   for them, which keeps one waiter in line: on the debug build the
//!   unlock answers after 10 to 16 s (with 5,000 readers 5 s, with one
//!   2.2 s); without the writer the waiter is granted with the first name
//!   freed, and the same unlock answers after 36 ms.
//! - `x` has one writer, which keeps 16 waiters (each on a connection of
//!   its own, on 1,000 names) in line: the unlock answers after 9 s (with
//!   32 waiters 15 to 21 s, with 8 4.4 s). A connection of such a waiter
//!   that closes ends its places on 1,000 names, and the others are tried
//!   once per name again: so the scene grants the waiters (the writer lets
//!   `x` go) before their connections close.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::net::{RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LocalLocker, LockArgs, LockMode, NetLocker, Ticket, WaitArgs, WaitReply};

use crate::node::TOKEN;
use crate::{args, capped, read_many};

/// Names of the write lock released (with `x`, each waiter's 1,000).
const NAMES: usize = 999;

fn wait(ticket: Ticket) -> WaitArgs {
    WaitArgs {
        ticket,
        place_ttl: Duration::from_secs(120),
        wake: Some(crate::ignored()),
    }
}

/// A lock of `names` by `uid`.
fn of(uid: &str, names: Vec<String>) -> LockArgs {
    LockArgs {
        resources: names.into(),
        ..args(uid)
    }
}

/// A client connection whose calls may take up to 2 minutes, so that the
/// unlock's own time is seen.
async fn connect(addr: &str) -> RemoteLocker {
    let mut config = RemoteConfig::new(TOKEN);
    config.call_timeout = Duration::from_secs(120);
    capped::bounded("connect", RemoteLocker::connect(addr.to_owned(), config))
        .await
        .expect("connect")
}

/// `readers` read locks of `x` (a writer waits for them) or, with none, a
/// writer's lock of `x`; `waiters` connections each wait to read `x` and
/// the `NAMES` names a write lock holds; the write lock's unlock must
/// answer within 2 s.
async fn a_release_answers_at_once(readers: usize, waiters: usize) {
    let _one_at_a_time = crate::HEAVY.lock().await;
    let locker = Arc::new(LocalLocker::new());
    let granted = read_many(&locker, readers).await;
    assert_eq!(granted, readers, "control: every read lock of x is granted");
    let (addr, _stop) = capped::serve(locker.clone(), ServerConfig::new(TOKEN)).await;
    let client = connect(&addr).await;

    let writer = of("writer-0000-0000-0000-000000000000", vec!["x".to_owned()]);
    if readers > 0 {
        // Waiting for x's readers, it keeps every younger reader of x in
        // line behind it.
        assert_eq!(
            client
                .lock_wait(&writer, LockMode::Write, &wait(Ticket::now()))
                .await,
            Ok(WaitReply::Queued),
            "control: the writer waits for x's readers"
        );
    } else {
        assert_eq!(client.lock(&writer).await, Ok(true), "control: x is free");
    }
    let names: Vec<String> = (0..NAMES).map(|i| format!("y-{i:04}")).collect();
    let held = of("held-0000-0000-0000-000000000000", names.clone());
    assert_eq!(
        client.lock(&held).await,
        Ok(true),
        "control: the names are free"
    );
    // Sorted, each once, as a coordinator sends them.
    let mut all = vec!["x".to_owned()];
    all.extend(names);
    let mut connections = Vec::new();
    for i in 0..waiters {
        let connection = connect(&addr).await;
        let waiter = of(
            &format!("waiter-{i:04}-0000-0000-000000000000"),
            all.clone(),
        );
        assert_eq!(
            connection
                .lock_wait(&waiter, LockMode::Read, &wait(Ticket::now()))
                .await,
            Ok(WaitReply::Queued),
            "control: the waiter waits behind the held names and x"
        );
        connections.push(connection);
    }

    let started = Instant::now();
    let released = tokio::time::timeout(Duration::from_secs(120), client.unlock(&held)).await;
    let took = started.elapsed();
    eprintln!("unlock {released:?} took {took:?}");
    let still_waiting = locker.waiting();
    // Letting x go grants the waiters in one batch, so that their
    // connections close without a release of each's places stalling
    // again (which each close would, while others wait).
    let unlocked = capped::bounded("the writer's unlock", client.unlock(&writer)).await;
    assert!(
        unlocked.is_ok(),
        "control: the writer lets x go: {unlocked:?}"
    );
    drop(connections);
    assert_eq!(
        still_waiting,
        waiters * (NAMES + 1) + usize::from(readers > 0),
        "control: the waiters were still in line"
    );
    assert!(
        matches!(released, Ok(Ok(true))) && took < crate::STALL_BAR,
        "the unlock of a write lock of {NAMES} names, {waiters} read waiters of them and of x \
         at the head of each line, kept waiting by x ({readers} readers and a writer waiting \
         for them, or a writer; all taken with the ordinary token within its limits), answered \
         {released:?} after {took:?}: the server stalled, trying the waiters once per name \
         freed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    debug_assertions,
    ignore = "times a loaded server: run optimized, `cargo test --release --all-features --test server_stalls` (CI does)"
)]
async fn a_release_of_many_names_ahead_of_a_waiter_a_busy_name_keeps_waiting_answers_at_once() {
    a_release_answers_at_once(20_000, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    debug_assertions,
    ignore = "times a loaded server: run optimized, `cargo test --release --all-features --test server_stalls` (CI does)"
)]
async fn a_release_of_many_names_ahead_of_waiters_of_a_thousand_names_answers_at_once() {
    a_release_answers_at_once(0, 16).await;
}
