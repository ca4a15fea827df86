//! docs/lock-servers.md, "Limits and memory": "A release of a waiter's uid
//! ends its place, over whichever connection it comes, and the connection
//! the place was asked over stops counting it." And: "A connection may
//! hold at most 1024 places in line; beyond that a waiter gets an error
//! saying so."
//!
//! Connection A waits under uid U for "held" (held by another uid). Over
//! connection C, U then takes a plain lock on a free name "z": a lock on
//! new names under a uid that another connection holds moves all of that
//! uid's charge to C. C then releases U on "held": the table drops U's
//! place, but the server looks for the place's record only on the
//! connection the uid is charged to now (C), not on the one it was asked
//! over (A). A keeps counting a place the table no longer has, and is
//! refused its next wait under a limit of one place until the record
//! expires (here 60 s).
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
async fn a_release_of_a_waiting_uid_held_elsewhere_ends_the_record_of_the_connection_it_waited_over(
) {
    let mut config = ServerConfig::new(TOKEN);
    config.max_waiters_per_connection = 1;
    config.idle_timeout = None;
    let node = start(config).await;
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut c, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut h, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let ttl = Duration::from_secs(60);
    assert_eq!(
        call(&mut h, 1, &lock_request(1, OP_LOCK, "h", &["held"])).await,
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
    assert_eq!(
        call(&mut c, 1, &lock_request(1, OP_LOCK, "U", &["z"])).await,
        [REPLY_BOOL, 1],
        "U locks z over C, which now counts U"
    );
    let released = call(&mut c, 2, &lock_request(2, OP_UNLOCK, "U", &["held"])).await;
    assert_eq!(
        node.locker.waiting(),
        0,
        "the release over C ended U's place ({released:?})"
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
