//! docs/lock-servers.md, "Limits and memory": "A place is the
//! connection's it was asked over last, one at a time: a waiter asking
//! over two open connections by turns moves its place back and forth, and
//! when the one it asked over last closes, the place ends though the other
//! is open." And (`Session::close`): "a lock server drops the places of a
//! connection as soon as it closes".
//!
//! Uid U holds a lock on "z", granted over connection B. Over B it then
//! waits for "x" (held by another uid) under ticket (1,1); then over
//! connection A, with the same ticket and names: the place is A's now, and
//! the table pushes its grant to A. A refresh of U's lock on "z" over B
//! moves U's charge back to B (a refresh moves it). A then closes: its
//! place's end asks whom the ledger charges U to (B) rather than which
//! connection asked for the place last (A), finds B's older record of the
//! same waiter, and leaves the place in the table, where a release of "x"
//! would grant it to a waiter nobody listens for.
//! Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::connections::authenticated;
use crate::node::{start, TOKEN};
use crate::wire::{
    call, lock_request, lock_wait_request, OP_LOCK, OP_REFRESH, QUEUED, REPLY_BOOL, REPLY_WAIT,
};
use quorum_lock::net::ServerConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_ends_when_the_connection_it_was_asked_over_last_closes_after_a_refresh_elsewhere()
{
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    let node = start(config).await;
    let [mut a, mut b, mut h] = authenticated(&node).await;
    let ttl = Duration::from_secs(60);
    assert_eq!(
        call(&mut h, 1, &lock_request(1, OP_LOCK, "h", &["x"])).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(&mut b, 1, &lock_request(1, OP_LOCK, "U", &["z"])).await,
        [REPLY_BOOL, 1],
        "U locks z over B"
    );
    assert_eq!(
        call(
            &mut b,
            2,
            &lock_wait_request(2, "U", &["x"], (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U waits for x over B"
    );
    assert_eq!(
        call(
            &mut a,
            1,
            &lock_wait_request(1, "U", &["x"], (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "the same waiter asks again over A: the place is A's"
    );
    assert_eq!(node.locker.waiting(), 1, "one place of U");
    let mut refresh = lock_request(3, OP_REFRESH, "U", &["z"]);
    refresh.push(0);
    assert_eq!(
        call(&mut b, 3, &refresh).await,
        [REPLY_BOOL, 1],
        "U's lock on z refreshed over B"
    );
    drop(a);
    let mut places = node.locker.waiting();
    for _ in 0..100 {
        if places == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        places = node.locker.waiting();
    }
    assert_eq!(
        places, 0,
        "A, which U's place was asked over last, closed 1 s ago, yet the table keeps the place"
    );
    drop(b);
}
