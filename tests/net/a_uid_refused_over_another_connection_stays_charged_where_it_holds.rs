//! docs/lock-servers.md: a lock counts against the connection that took
//! or last refreshed it, and "a connection that sends nothing for
//! `idle_timeout` while it holds nothing on the server ... is closed". A
//! uid may speak over several connections (a client that reconnected); a
//! request of it that the table refuses over one of them takes nothing
//! and refreshes nothing, so it must leave the uid's charge with the
//! connection that holds its lock. Each scene: connection 1 takes uid
//! `u`'s lock on "a"; another client holds "b"; over connection 2, `u`
//! asks for "b" and is refused. Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use tokio::net::TcpStream;

use crate::node::{start, Node, TOKEN};
use crate::wire::{
    authenticate_as, call, closed_within, lock_request, OP_LOCK, REPLY_BOOL, VERSION_6,
};

async fn connect(node: &Node) -> TcpStream {
    // Version 6: a version-2 client's refused lock keeps a place for its
    // next poll, which would count on that connection.
    authenticate_as(&node.addr, TOKEN, VERSION_6)
        .await
        .expect("authenticates")
        .0
}

/// Connection 1 holds `u`'s lock on "a", another connection holds "b",
/// and `u`'s request for "b" over connection 2 is refused. Returns
/// connections 1, 2 and the other one, all open.
async fn refused_elsewhere(node: &Node) -> [TcpStream; 3] {
    let mut first = connect(node).await;
    let mut other = connect(node).await;
    let mut second = connect(node).await;
    let lock = |id, uid, name| lock_request(id, OP_LOCK, uid, &[name]);
    assert_eq!(
        call(&mut first, 1, &lock(1, "u", "a")).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(&mut other, 1, &lock(1, "v", "b")).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(&mut second, 1, &lock(1, "u", "b")).await,
        [REPLY_BOOL, 0],
        "b is held by another uid"
    );
    [first, second, other]
}

/// Reproduces a past break: a refused request moved its uid's whole charge to the connection it came over, so the connection holding the uid's live lock counted as holding nothing and was closed for idleness.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_locks_connection_is_not_closed_for_idleness_after_its_uid_is_refused_elsewhere() {
    const IDLE: Duration = Duration::from_millis(200);
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = Some(IDLE);
    let node = start(config).await;
    let [mut first, _second, _other] = refused_elsewhere(&node).await;
    // The lock on "a" lives for the validity (60 s): connection 1 holds
    // it all that while, however silent.
    let closed = closed_within(&mut first, 10 * IDLE).await;
    assert!(
        closed.is_err(),
        "the connection holding u's live lock on a was closed for idleness within 2 s (idle \
         timeout 200 ms) after u's request for b was refused over another connection"
    );
    assert_eq!(node.locker.snapshot().len(), 2, "u's and v's locks stand");
}

/// Reproduces a past break: a connection over which a request of a uid holding a lock elsewhere was refused counted that lock, so under a one-lock limit it was refused its own next lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_lock_leaves_its_connection_nothing_charged() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_entries_per_connection = 1;
    let node = start(config).await;
    let [_first, mut second, _other] = refused_elsewhere(&node).await;
    assert_eq!(
        call(&mut second, 2, &lock_request(2, OP_LOCK, "w", &["c"])).await,
        [REPLY_BOOL, 1],
        "a connection allowed one lock, holding none (its only request was refused), is granted \
         a lock"
    );
}
