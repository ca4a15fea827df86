//! Reproduces past breaks: a waiter's re-check of its queued write place
//! on {x, y}, while its uid holds read locks on some or all of those names
//! granted under other sets, was charged a second time ("beside") and
//! refused over a per-connection cap that holds everything the table
//! keeps: beside a read lock on fewer names, beside read locks on every
//! name taken one by one, and beside read locks won by one wider wait.
//!
//! docs/lock-servers.md, "Limits and memory": a place "is charged as a
//! lock is while its connection keeps it"; only "one a uid keeps beside
//! its own lock on the same names ... is charged apart from that lock",
//! and not beside locks "granted under other sets (by plain locks, or by
//! waits for other names)". Here U asks again under its uid, its ticket
//! and the same names, and the table keeps the very same place.
//!
//! Scene: U takes its read locks (each set charged); R read-locks "x"
//! over another connection. U waits (pushed) for the write lock on x and
//! y: queued, charged as the new set {x, y}. The cap holds all these
//! charges with room to spare, but not {x, y} twice. U asks the same wait
//! again (a client's re-check). Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use tokio::net::TcpStream;

use crate::connections::authenticated;
use crate::lockers;
use crate::node::{start_over, Node, TOKEN};
use crate::wire::{
    call, lock_request, lock_wait_request, read_wait_request, GRANTED, OP_RLOCK, QUEUED,
    REPLY_BOOL, REPLY_WAIT,
};

const TTL: Duration = Duration::from_secs(30);

/// How U came by a read lock.
#[derive(Debug, Clone, Copy)]
enum Read {
    /// A plain read lock on these names.
    Lock(&'static [&'static str]),
    /// A read wait on these names, granted at once, under its own ticket.
    Wait(&'static [&'static str]),
}

/// U takes `u_reads`, R read-locks x, U waits for the write lock on
/// {x, y}. Returns what U's read locks and its place are charged, and
/// the two connections.
async fn scene(node: &Node, u_reads: &[Read]) -> (usize, usize, TcpStream, TcpStream) {
    let [mut u, mut r] = authenticated(node).await;
    for (n, read) in u_reads.iter().enumerate() {
        let id = n as u64 + 1;
        let answer = match *read {
            Read::Lock(names) => call(&mut u, id, &lock_request(id, OP_RLOCK, "U", names)).await,
            Read::Wait(names) => {
                let wait = read_wait_request(id, "U", names, (0, 7 + id), TTL, true);
                call(&mut u, id, &wait).await[..2].to_vec()
            }
        };
        let granted: &[u8] = match read {
            Read::Lock(_) => &[REPLY_BOOL, 1],
            Read::Wait(_) => &[REPLY_WAIT, GRANTED],
        };
        assert_eq!(answer, granted, "U's {read:?} is granted at once");
    }
    let read_locks = node.stats.lock_bytes();
    assert_eq!(
        call(&mut r, 1, &lock_request(1, OP_RLOCK, "R", &["x"])).await,
        [REPLY_BOOL, 1],
        "R read-locks x"
    );
    let with_r = node.stats.lock_bytes();
    let wait = lock_wait_request(100, "U", &["x", "y"], (1, 1), TTL, true);
    let queued = call(&mut u, 100, &wait).await;
    assert_eq!(
        queued[..2],
        [REPLY_WAIT, QUEUED],
        "U waits for the write lock on x and y: {queued:?}"
    );
    let place = node.stats.lock_bytes() - with_r;
    (read_locks, place, u, r)
}

async fn re_check_beside_read_locks_is_admitted(u_reads: &[Read]) {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    let locker = lockers::config_without_quarantine(Duration::from_secs(30));
    // A server without a cap measures the charges first.
    let measure = start_over(locker, config.clone()).await;
    let (read_locks, place, u, r) = scene(&measure, u_reads).await;
    drop((u, r));
    let cap = read_locks + place + place / 2;
    config.max_bytes_per_connection = cap;
    let node = start_over(locker, config).await;
    let (_, _, mut u, r) = scene(&node, u_reads).await;
    let before = node.stats.lock_bytes();
    let wait = lock_wait_request(101, "U", &["x", "y"], (1, 1), TTL, true);
    let again = call(&mut u, 101, &wait).await;
    let after = node.stats.lock_bytes();
    assert_eq!(
        again[..2.min(again.len())],
        [REPLY_WAIT, QUEUED],
        "U holding {u_reads:?}: its re-check of the same wait (same uid, ticket and names; the \
         table keeps the same place) is refused over a cap ({cap}) that holds all U keeps (read \
         locks {read_locks} + place {place}; server total {before} before, {after} after, R's \
         read lock on another connection among it): {:?}",
        String::from_utf8_lossy(&again)
    );
    assert_eq!(after, before, "the re-check charges nothing more");
    drop((u, r));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_asked_again_beside_a_read_lock_on_fewer_names_is_admitted_under_the_cap() {
    re_check_beside_read_locks_is_admitted(&[Read::Lock(&["x"])]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_asked_again_beside_read_locks_on_every_name_under_other_sets_is_admitted() {
    re_check_beside_read_locks_is_admitted(&[Read::Lock(&["x"]), Read::Lock(&["y"])]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_asked_again_beside_read_locks_its_uid_won_by_a_wider_wait_is_admitted() {
    re_check_beside_read_locks_is_admitted(&[Read::Wait(&["x", "y", "z"])]).await;
}
