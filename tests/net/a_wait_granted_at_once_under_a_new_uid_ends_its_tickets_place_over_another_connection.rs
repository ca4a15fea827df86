//! docs/lock-servers.md, "Limits and memory": "A release of a waiter's
//! uid, or a lock call or wait granted to it at once, ends its places,
//! over whichever connection it comes, and every connection a place was
//! asked over stops counting it." And: "A connection may hold at most
//! 1024 places in line; beyond that a waiter gets an error saying so."
//! (A waiter is a uid or a ticket: "A waiter that asks again ... with the
//! same ticket under a new uid ... keeps the places of its newest request
//! only, on every name".)
//!
//! H holds "held". A waiter asks over connection A under uid U1 with
//! ticket (1,1) for ["free", "held"]: queued. It asks again over
//! connection B with the same ticket under a new uid U2 for ["free"]
//! alone: U1's place on "free" is the same waiter's, so the wait is
//! granted at once. The table ends the waiter's places: U1's place on
//! "free" by the grant, and on "held" as a superseded request
//! (`end_superseded`), so it keeps no place at all. But `Session::ask`'s
//! Granted path takes over other connections' places only where its names
//! cover them (`take_over_places`), and ends the places elsewhere of its
//! own uid U2 only (`places_elsewhere`), not those of its ticket under
//! U1: A keeps counting U1's place (for its place_ttl, up to a minute),
//! and under max_waiters_per_connection 1 A's next wait is refused while
//! the table keeps no place of A.
//! Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::connections::authenticated;
use crate::node::{start, TOKEN};
use crate::wire::{
    call, lock_request, lock_wait_request, GRANTED, OP_LOCK, QUEUED, REPLY_BOOL, REPLY_WAIT,
};
use quorum_lock::net::ServerConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_granted_at_once_under_a_new_uid_ends_its_tickets_place_over_another_connection() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_waiters_per_connection = 1;
    config.idle_timeout = None;
    let node = start(config).await;
    let [mut a, mut b, mut h] = authenticated(&node).await;
    let ttl = Duration::from_secs(60);
    assert_eq!(
        call(&mut h, 1, &lock_request(1, OP_LOCK, "h", &["held"])).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(
            &mut a,
            1,
            &lock_wait_request(1, "U1", &["free", "held"], (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "the waiter asks over A under U1 for free and held"
    );
    assert_eq!(node.locker.waiting(), 2);
    assert_eq!(
        call(
            &mut b,
            1,
            &lock_wait_request(1, "U2", &["free"], (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, GRANTED],
        "the same waiter (its ticket) under U2 over B is granted free at once"
    );
    // Past the moment: a sweep of A (every second) would not change this,
    // as its record lasts the place's ttl.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let left = node.locker.waiting();
    let body = call(
        &mut a,
        2,
        &lock_wait_request(2, "W", &["held"], (3, 1), ttl, true),
    )
    .await;
    assert_eq!(
        (left, body.first()),
        (0, Some(&REPLY_WAIT)),
        "a wait granted at once to the waiter over B should end its places over A; the table \
         keeps {left} place(s), and A's wait for another uid gets {}",
        String::from_utf8_lossy(&body)
    );
}
