//! A uid that holds a lock or a watch over one connection and asks again
//! for the same over another, full connection is refused there: the move
//! would put one lock id past that connection's limit. docs/lock-servers.md,
//! "Limits and memory": "Locks count against their connection (100,000
//! locks or 64 MiB) ... The lock limit counts lock ids"; "an observer's
//! watch ... counts as one lock id of the observer's connection"; "A lock,
//! a place or a watch under a uid that another connection holds (on new
//! names, or again on the same ones) moves all of that uid's locks to this
//! connection, so it is admitted only when this connection's limits hold
//! them all; a refresh moves them without that check". Neither request is
//! a refresh, and refusing it costs nothing: what the uid holds over the
//! first connection stands.
//!
//! Each scene: a limit of one lock per connection; over connection B, W
//! locks "w", which fills B. Each reproduces a past break, in which a
//! request found charged with as many bytes needed no admission and moved
//! the uid's whole charge to B. Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{start, Node, TOKEN};
use crate::wire::{
    authenticate_as, call, leader_request, lock_request, OP_LOCK, REPLY_BOOL, REPLY_ERROR,
    REPLY_LEADER, VERSION_6,
};
use quorum_lock::net::ServerConfig;
use tokio::net::TcpStream;

/// A server of one lock per connection, and connections A and B, W's lock
/// on "w" filling B.
async fn b_full() -> (Node, TcpStream, TcpStream) {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    config.max_entries_per_connection = 1;
    let node = start(config).await;
    let (a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut b, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    assert_eq!(
        call(&mut b, 1, &lock_request(1, OP_LOCK, "W", &["w"])).await,
        [REPLY_BOOL, 1],
        "W locks w over B"
    );
    (node, a, b)
}

/// Over A, U locks "x"; over B, U locks "x" again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_lock_taken_again_over_a_full_connection_is_refused() {
    let (_node, mut a, mut b) = b_full().await;
    assert_eq!(
        call(&mut a, 1, &lock_request(1, OP_LOCK, "U", &["x"])).await,
        [REPLY_BOOL, 1],
        "U locks x over A"
    );
    assert_ne!(
        call(&mut b, 2, &lock_request(2, OP_LOCK, "V", &["v"])).await[..],
        [REPLY_BOOL, 1],
        "control: B holds its one lock: V is refused over B"
    );
    let again = call(&mut b, 3, &lock_request(3, OP_LOCK, "U", &["x"])).await;
    assert_ne!(
        again[..],
        [REPLY_BOOL, 1],
        "connection B, limited to one lock and holding W's, is granted U's lock on x taken \
         again: U's charge was found for the same names and adopted by B without any admission"
    );
    drop((a, b));
}

/// Over A, observer O watches "e"; over B, O watches "e" again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_asked_again_over_a_full_connection_is_refused() {
    const TTL: Duration = Duration::from_secs(30);
    let (_node, mut a, mut b) = b_full().await;
    let other = call(&mut b, 2, &leader_request(2, "P", &["f"], Some(TTL))).await;
    assert_eq!(
        other.first(),
        Some(&REPLY_ERROR),
        "control: B holds its one lock id, so a new observer's watch over B is refused: {:?}",
        String::from_utf8_lossy(&other)
    );
    let first = call(&mut a, 1, &leader_request(1, "O", &["e"], Some(TTL))).await;
    assert_eq!(
        first.first(),
        Some(&REPLY_LEADER),
        "O watches e over A: {first:?}"
    );
    let again = call(&mut b, 3, &leader_request(3, "O", &["e"], Some(TTL))).await;
    assert_ne!(
        again.first(),
        Some(&REPLY_LEADER),
        "connection B, limited to one lock id and holding W's, kept O's watch on e asked again \
         over it: O's charge (a lock id) was moved to B without any admission"
    );
    drop((a, b));
}
