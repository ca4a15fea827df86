//! Reproduces: an admin's force by name of a name read by many holders,
//! each of which waits in a line that other clients' places make long,
//! keeps a thread that serves clients busy for a time that grows with the
//! square of the table: the table's own walk runs off the serving threads
//! (`force_everywhere`), but the server then ends each forced holder's
//! place record and settles its charge one uid at a time
//! (`end_place`, `places_elsewhere`, `end_places`), each end walking the
//! whole line of its names again, on the thread that serves the admin's
//! connection.
//!
//! docs/lock-servers.md (admin, threat model): a force "of names alone
//! makes the server look through its whole table; the server does one
//! such search at a time, off the threads that serve the clients, so a
//! flood of them delays only each other"; forcing a name open is how an
//! admin gives the room back when a client filled the table, "however
//! many uids one force names (a name read by tens of thousands of waiters
//! included)".
//!
//! Scene, on a server whose runtime has one worker thread: H locks "c".
//! N uids F0.. read-lock "x" and wait (pushed) for the write lock on "c";
//! N other uids W0.. wait for "c" too, in between (1,000 places per
//! connection). A client Q read-locks "q" again and again over its own
//! connection. The admin forces "x" open by name. Q's requests must keep
//! being answered while the force runs: a walk of the table is not the
//! serving threads' work. With N = 8,000 (a debug build) Q waited about
//! 1.4 s for one answer, as long as the whole force (and 0.37 s at
//! N = 4,000, 0.1 s at N = 2,000: the square). Real time (sockets), every
//! call bounded.
#![cfg(feature = "net")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::net::ServerConfig;

use crate::capped::ADMIN;
use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, lock_wait_request, OP_FORCE_UNLOCK, OP_LOCK, OP_RLOCK,
    QUEUED, REPLY_BOOL, REPLY_WAIT, VERSION_6,
};

/// Forced holders, and as many other waiters in the same line.
const N: usize = 8_000;
/// What one answer to Q may take while the force runs.
const BOUND: Duration = Duration::from_millis(600);

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn an_admins_force_by_name_of_many_waiting_holders_does_not_hold_up_other_clients() {
    tokio::time::timeout(Duration::from_secs(120), scene())
        .await
        .expect("the scene is over within 120 s");
}

async fn scene() {
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.idle_timeout = None;
    let node = start(config).await;
    let (mut l, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut admin, _) = authenticate_as(&node.addr, ADMIN, VERSION_6).await.unwrap();
    assert_eq!(
        call(&mut l, 1, &lock_request(1, OP_LOCK, "H", &["c"])).await,
        [REPLY_BOOL, 1],
        "H locks c"
    );
    let mut waiters = Vec::new();
    let mut id = 10u64;
    for k in 0..(2 * N).div_ceil(1000) {
        let (mut p, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
        for i in (k * 1000)..((k + 1) * 1000).min(2 * N) {
            id += 1;
            let forced = i % 2 == 1;
            let uid = format!("{}{i}", if forced { "F" } else { "W" });
            if forced {
                assert_eq!(
                    call(&mut l, id, &lock_request(id, OP_RLOCK, &uid, &["x"])).await,
                    [REPLY_BOOL, 1],
                    "{uid} read-locks x"
                );
            }
            let ticket = (i as u64 + 1, 1);
            let wait = lock_wait_request(id, &uid, &["c"], ticket, Duration::from_secs(300), true);
            let queued = call(&mut p, id, &wait).await;
            assert_eq!(queued[..2], [REPLY_WAIT, QUEUED], "{uid} waits for c");
        }
        waiters.push(p);
    }
    let (mut q, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let pinging = done.clone();
    let pinger = tokio::spawn(async move {
        let (mut worst, mut n) = (Duration::ZERO, 1u64);
        while !pinging.load(Ordering::SeqCst) {
            let asked = Instant::now();
            let reply = call(&mut q, n, &lock_request(n, OP_RLOCK, "Q", &["q"])).await;
            assert_eq!(reply, [REPLY_BOOL, 1], "Q read-locks q");
            worst = worst.max(asked.elapsed());
            n += 1;
        }
        worst
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let asked = Instant::now();
    let forced = call(&mut admin, 1, &lock_request(1, OP_FORCE_UNLOCK, "", &["x"])).await;
    let took = asked.elapsed();
    done.store(true, Ordering::SeqCst);
    let worst = pinger.await.unwrap();
    assert_eq!(forced, [REPLY_BOOL, 1], "the admin forces x open by name");
    assert_eq!(
        node.locker.waiting(),
        N,
        "the forced holders' places are gone"
    );
    assert!(
        worst <= BOUND,
        "while the admin forced x open ({N} holders, each waiting in a line of {} places; the \
         force took {took:?}), another client's read lock on another name waited {worst:?} for \
         its answer (bound {BOUND:?}): the force held up the thread that serves it",
        2 * N
    );
    drop((l, admin, waiters));
}
