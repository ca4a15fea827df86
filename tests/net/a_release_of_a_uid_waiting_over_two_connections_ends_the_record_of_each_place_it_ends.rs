//! docs/lock-servers.md, "Limits and memory": "A release of a waiter's uid
//! ends its place, over whichever connection it comes, and the connection
//! the place was asked over stops counting it." And: "A connection may
//! hold at most 1024 places in line; beyond that a waiter gets an error
//! saying so."
//!
//! Uid U waits over connection A for "held" under ticket (1,1), then over
//! connection B for "held2" under another ticket (2,1): two places of the
//! same uid in the table, each asked over its own connection (neither one
//! superseded the other). The server-wide index of which connection
//! recorded each uid's place keeps one connection per uid, B, the last.
//! Connection C then releases U on "held": the table drops U's place
//! there (A's), and the server ends the record it finds in the index, B's
//! (whose place it also takes out of the table). A's record of a place
//! the table no longer keeps stays, and A is refused its next wait under
//! a limit of one place until that record expires (here 60 s).
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
async fn a_release_of_a_uid_waiting_over_two_connections_ends_the_record_of_each_place_it_ends() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_waiters_per_connection = 1;
    config.idle_timeout = None;
    let node = start(config).await;
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut b, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut c, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut h, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let ttl = Duration::from_secs(60);
    assert_eq!(
        call(
            &mut h,
            1,
            &lock_request(1, OP_LOCK, "h", &["held", "held2"])
        )
        .await,
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
        "U waits on A for held"
    );
    assert_eq!(
        call(
            &mut b,
            1,
            &lock_wait_request(1, "U", &["held2"], (2, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U waits on B for held2, as another waiter"
    );
    assert_eq!(node.locker.waiting(), 2, "two places of U in the table");
    let released = call(&mut c, 1, &lock_request(1, OP_UNLOCK, "U", &["held"])).await;
    assert_eq!(
        node.locker.waiting(),
        0,
        "the release over C ended U's places ({released:?})"
    );
    let body = call(
        &mut a,
        2,
        &lock_wait_request(2, "W", &["held"], (3, 1), ttl, true),
    )
    .await;
    assert_eq!(
        body.first(),
        Some(&REPLY_WAIT),
        "A keeps no place in the table, yet its wait is refused under a limit of one place: {}",
        String::from_utf8_lossy(&body)
    );
}
