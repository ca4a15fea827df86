//! docs/lock-servers.md, "Limits and memory": "A place is the connection's
//! it was asked over last, one at a time", and "A connection may hold at
//! most 1024 places in line; beyond that a waiter gets an error saying
//! so." A waiter whose place moved to another connection by asking there
//! again, for the same names under the same ticket, leaves the first
//! connection holding no place: its next wait fits under a limit of one.
//! Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, lock_wait_request, GRANTED, OP_LOCK, OP_UNLOCK, QUEUED,
    REPLY_BOOL, REPLY_WAIT, VERSION_6,
};
use quorum_lock::net::ServerConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_asked_again_over_another_connection_stops_counting_on_the_first() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_waiters_per_connection = 1;
    config.idle_timeout = None;
    let node = start(config).await;
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut b, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut h, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let ttl = Duration::from_secs(60);
    assert_eq!(
        call(&mut h, 1, &lock_request(1, OP_LOCK, "h", &["held"])).await,
        [REPLY_BOOL, 1]
    );
    for (conn, id) in [(&mut a, 1), (&mut b, 1)] {
        assert_eq!(
            call(
                conn,
                id,
                &lock_wait_request(id, "U", &["held"], (1, 1), ttl, true)
            )
            .await,
            [REPLY_WAIT, QUEUED],
            "U waits"
        );
    }
    assert_eq!(node.locker.waiting(), 1, "one place, B's now");
    let body = call(
        &mut a,
        2,
        &lock_wait_request(2, "W", &["held"], (2, 1), ttl, true),
    )
    .await;
    assert_eq!(
        body.first(),
        Some(&REPLY_WAIT),
        "U's place moved to B, yet A's wait for another uid is refused under a limit of one \
         place: {}",
        String::from_utf8_lossy(&body)
    );
}

/// The same when the waiter's place, a reservation (no pushes) over A, is
/// granted by its ask over B once the lock is free: the table ended the
/// place, and A holds none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_granted_when_asked_over_another_connection_stops_counting_on_the_first() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_waiters_per_connection = 1;
    config.idle_timeout = None;
    let node = start(config).await;
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut b, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut h, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let ttl = Duration::from_secs(60);
    assert_eq!(
        call(&mut h, 1, &lock_request(1, OP_LOCK, "h", &["held"])).await,
        [REPLY_BOOL, 1]
    );
    let reply = call(
        &mut a,
        1,
        &lock_wait_request(1, "U", &["held"], (1, 1), ttl, false),
    )
    .await;
    assert_eq!(reply.first(), Some(&REPLY_WAIT), "U keeps a place over A");
    assert_eq!(node.locker.waiting(), 1);
    assert_eq!(
        call(&mut h, 2, &lock_request(2, OP_UNLOCK, "h", &["held"])).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(
            &mut b,
            1,
            &lock_wait_request(1, "U", &["held"], (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, GRANTED],
        "U's ask over B is granted"
    );
    assert_eq!(node.locker.waiting(), 0, "no place is left");
    let body = call(
        &mut a,
        2,
        &lock_wait_request(2, "W", &["held"], (2, 1), ttl, true),
    )
    .await;
    assert_eq!(
        body.first(),
        Some(&REPLY_WAIT),
        "U's place was granted over B, yet A's wait for another uid is refused under a limit \
         of one place: {}",
        String::from_utf8_lossy(&body)
    );
}

/// The same when the waiter's uid takes a plain lock on the place's names
/// over B once they are free: the grant ended the place in the table, and
/// A holds none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_whose_uid_takes_a_plain_lock_over_another_connection_stops_counting_on_the_first()
{
    let mut config = ServerConfig::new(TOKEN);
    config.max_waiters_per_connection = 1;
    config.idle_timeout = None;
    let node = start(config).await;
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut b, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut h, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let ttl = Duration::from_secs(60);
    assert_eq!(
        call(&mut h, 1, &lock_request(1, OP_LOCK, "h", &["held"])).await,
        [REPLY_BOOL, 1]
    );
    let reply = call(
        &mut a,
        1,
        &lock_wait_request(1, "U", &["held"], (1, 1), ttl, false),
    )
    .await;
    assert_eq!(reply.first(), Some(&REPLY_WAIT), "U keeps a place over A");
    assert_eq!(node.locker.waiting(), 1);
    assert_eq!(
        call(&mut h, 2, &lock_request(2, OP_UNLOCK, "h", &["held"])).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(&mut b, 1, &lock_request(1, OP_LOCK, "U", &["held"])).await,
        [REPLY_BOOL, 1],
        "U's plain lock over B is granted"
    );
    assert_eq!(node.locker.waiting(), 0, "no place is left");
    let body = call(
        &mut a,
        2,
        &lock_wait_request(2, "W", &["held"], (2, 1), ttl, true),
    )
    .await;
    assert_eq!(
        body.first(),
        Some(&REPLY_WAIT),
        "U was granted a plain lock over B, yet A's wait for another uid is refused under a limit \
         of one place: {}",
        String::from_utf8_lossy(&body)
    );
}
