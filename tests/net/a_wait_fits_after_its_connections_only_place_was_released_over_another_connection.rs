//! docs/lock-servers.md, "Limits and memory": "A connection may hold at
//! most 1024 places in line; beyond that a waiter gets an error saying
//! so." A release "also ends the uid's place in line, in any mode"
//! (src/net/requests.rs); a connection whose only place the table ended
//! holds no place, so its next wait fits under a limit of one.
//!
//! Connection A waits under uid U for "held" (held by another uid). The
//! waiter releases U over connection B (as a client whose call timed out
//! on A may, over a new connection): the table drops U's place, but A
//! still records it, and refuses A's next wait for the limit until the
//! record expires (here 60 s).
//! Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, lock_wait_request, OP_LOCK, OP_UNLOCK, QUEUED, REPLY_BOOL,
    REPLY_WAIT, VERSION_6,
};
use quorum_lock::net::ServerConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_fits_after_its_connections_only_place_was_released_over_another_connection() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_waiters_per_connection = 1;
    config.idle_timeout = None;
    let node = start(config).await;
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut b, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut c, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let ttl = Duration::from_secs(60);
    assert_eq!(
        call(&mut c, 1, &lock_request(1, OP_LOCK, "h", &["held"])).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(
            &mut a,
            1,
            &lock_wait_request(1, "U", &["held"], (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U waits on A"
    );
    assert_eq!(node.locker.waiting(), 1);
    let released = call(&mut b, 1, &lock_request(1, OP_UNLOCK, "U", &["held"])).await;
    assert_eq!(
        node.locker.waiting(),
        0,
        "the release over B ended U's place ({released:?})"
    );
    let body = call(
        &mut a,
        2,
        &lock_wait_request(2, "W", &["held"], (2, 1), ttl, true),
    )
    .await;
    assert_eq!(
        body.first(),
        Some(&REPLY_WAIT),
        "A keeps no place in the table, yet its wait is refused under a limit of one place: {}",
        String::from_utf8_lossy(&body)
    );
}
