//! Reproduces: a uid's write place beside its own read lock, ended by the table when the uid re-checks its granted read wait, keeps its "beside" charge, so the connection is refused a lock its limit holds.
//!
//! docs/lock-servers.md, "Limits and memory": "A place is charged as a
//! lock is while its connection keeps it ...; one a uid keeps beside its
//! own lock on the same names (waiting for the write lock while it holds
//! the read lock) is charged apart from that lock. A place that ends
//! without a grant gives its charge back"; and a connection may hold
//! locks up to `max_bytes_per_connection`.
//!
//! Scene: each connection may hold two single-name locks' charge. Over B,
//! R read-locks "x". Over A, U waits (pushed) for a read lock on "x" and is
//! granted at once; then U waits for the write lock on "x" (another
//! ticket): queued beside its read entry, charged apart. Then U re-checks
//! its read wait: granted again, and the table ends U's write place (one
//! waiter keeps its newest request's places only). The table keeps U's
//! read entry alone, so A holds one lock's charge, and a lock of V on "v"
//! over A fits its limit. Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;

use crate::connections::authenticated;
use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, lock_wait_request, read_wait_request, GRANTED, OP_LOCK,
    OP_RLOCK, QUEUED, REPLY_BOOL, REPLY_WAIT, VERSION_6,
};

const TTL: Duration = Duration::from_secs(30);

/// What one lock of a one-letter uid on a one-letter name is charged.
async fn one_lock() -> usize {
    let node = start(ServerConfig::new(TOKEN)).await;
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    assert_eq!(
        call(&mut a, 1, &lock_request(1, OP_LOCK, "M", &["m"])).await,
        [REPLY_BOOL, 1]
    );
    node.stats.lock_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_place_ended_by_its_uids_read_recheck_gives_its_charge_back() {
    let lock = one_lock().await;
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    config.max_bytes_per_connection = 2 * lock;
    let node = start(config).await;
    let [mut a, mut b] = authenticated(&node).await;

    assert_eq!(
        call(&mut b, 1, &lock_request(1, OP_RLOCK, "R", &["x"])).await,
        [REPLY_BOOL, 1],
        "R read-locks x over B"
    );
    let read = call(
        &mut a,
        1,
        &read_wait_request(1, "U", &["x"], (1, 1), TTL, true),
    )
    .await;
    assert_eq!(
        read[..2],
        [REPLY_WAIT, GRANTED],
        "U is granted the read lock on x"
    );
    let write = call(
        &mut a,
        2,
        &lock_wait_request(2, "U", &["x"], (2, 1), TTL, true),
    )
    .await;
    assert_eq!(
        write[..2],
        [REPLY_WAIT, QUEUED],
        "U waits for the write lock on x beside its read lock: {write:?}"
    );
    assert_eq!(
        node.stats.lock_bytes(),
        3 * lock,
        "R's lock, U's lock, U's place"
    );
    let again = call(
        &mut a,
        3,
        &read_wait_request(3, "U", &["x"], (1, 1), TTL, true),
    )
    .await;
    assert_eq!(
        again[..2],
        [REPLY_WAIT, GRANTED],
        "U's read wait re-checked: granted again"
    );
    assert_eq!(
        node.locker
            .snapshot()
            .iter()
            .filter(|info| info.resource == "x")
            .count(),
        2,
        "the table keeps R's and U's read entries on x"
    );

    let v = call(&mut a, 4, &lock_request(4, OP_LOCK, "V", &["v"])).await;
    assert_eq!(
        v,
        [REPLY_BOOL, 1],
        "V's lock over A, which holds U's read lock alone (limit: two locks' charge, {} bytes), \
         is refused: {:?}; the server charges {} bytes in all where the table keeps two locks \
         ({} bytes): U's write place, which the table ended, is still charged",
        2 * lock,
        String::from_utf8_lossy(&v),
        node.stats.lock_bytes(),
        2 * lock
    );
    drop((a, b));
}
