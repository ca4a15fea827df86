//! docs/lock-servers.md, "Limits and memory": "A release of a waiter's
//! uid, or a lock granted to it, ends its places, over whichever
//! connection it comes, and every connection a place was asked over stops
//! counting it." And: "A connection may hold at most 1024 places in line;
//! beyond that a waiter gets an error saying so."
//!
//! H holds "held". Uid U waits over connection A for ["held"] (ticket
//! (1,1)). Then U's waiting lock over connection B for ["free"] (ticket
//! (2,1)) is granted at once: a lock granted to U. A plain lock of U over
//! B ends U's place over A (`Session::grant` ends the records the index
//! names, `places_elsewhere`, and takes what is left of them out of the
//! table); so does the same wait over A itself (`Waits::supersede`). A
//! waiting lock granted over B does not: `Session::ask` only takes over
//! the places elsewhere that its names cover (`take_over_places`), so U's
//! place on "held" stays in the table and A keeps counting it: under
//! max_waiters_per_connection 1, A's next wait (for another uid) is
//! refused.
//! Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, lock_wait_request, GRANTED, OP_LOCK, QUEUED, REPLY_BOOL,
    REPLY_WAIT, VERSION_6,
};
use quorum_lock::net::ServerConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_granted_to_a_uid_ends_its_places_over_other_connections() {
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
    assert_eq!(
        call(
            &mut a,
            1,
            &lock_wait_request(1, "U", &["held"], (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U waits over A for held"
    );
    assert_eq!(node.locker.waiting(), 1);
    assert_eq!(
        call(
            &mut b,
            1,
            &lock_wait_request(1, "U", &["free"], (2, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, GRANTED],
        "U's waiting lock over B is granted at once"
    );
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
        "a lock granted to U over B should end its place over A; the table keeps {left} \
         place(s), and A's wait for another uid gets {}",
        String::from_utf8_lossy(&body)
    );
}
