//! docs/lock-servers.md, "Limits and memory": "an observer's watch counts
//! its name and uid plus about 1,030 bytes, and its uid counts as one lock
//! id of the observer's connection"; "A lock or a place on new names
//! under a uid that another connection holds moves all of that uid's
//! locks to this connection, so it is admitted only when this
//! connection's limits hold them all; a refresh moves them without that
//! check (refusing it would cost the holder its lock)". "Threat model": a
//! client "can fill limits, each of which bounds it: per connection
//! 100,000 locks"; only "a refresh over another connection moves the
//! charge there even past that connection's own limits".
//!
//! `Ledger::reserve_board` admits nothing for a board record it finds
//! charged with as many bytes (`need` is `None` for a uid already charged
//! and no growth), yet then adopts the uid's whole charge over the
//! connection asking (`Inner::adopt`), one lock id more there, without
//! looking at that connection's limits. A watch asked again on the same
//! name over another connection is no refresh of a lock (a watch-only uid
//! is never moved by a refresh: it holds no entry), and refusing it costs
//! nothing (the watch over the first connection stands), yet it moves the
//! observer's lock id past the limit, where it stays as long as the
//! observer keeps watching there.
//!
//! A limit of one lock per connection. Over connection B, W locks "w": B
//! is full (a new observer's watch over B is refused). Over connection A,
//! observer O watches "e". Over B, O watches "e" again: it is to be
//! refused, as B holds its one lock id. Real time (sockets), every call
//! bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate_as, call, leader_request, lock_request, OP_LOCK, REPLY_BOOL, REPLY_ERROR,
    REPLY_LEADER, VERSION_6,
};
use quorum_lock::net::ServerConfig;

const TTL: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_asked_again_over_a_full_connection_is_refused() {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    config.max_entries_per_connection = 1;
    let node = start(config).await;
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut b, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();

    assert_eq!(
        call(&mut b, 1, &lock_request(1, OP_LOCK, "W", &["w"])).await,
        [REPLY_BOOL, 1],
        "W locks w over B"
    );
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
         over it: O's charge (a lock id) was moved to B without any admission, as the board \
         record was found charged with as many bytes"
    );
    drop((a, b));
}
