//! Reproduces a past break: a client connection that took a lock and then fell silent, its lock long expired, was never closed for idleness: the expired lock's charge is pruned only when some admission does not fit, so on a server with room it holds its slot for ever.
//!
//! docs/lock-servers.md: "A connection that sends nothing for
//! `idle_timeout` while it holds nothing on the server (...; a lock that
//! expired without a release counts until the server prunes its charge)
//! is closed, which frees its slot." The ledger prunes lapsed charges only
//! in `admit`, when a new charge would go over a limit; `holds` reads the
//! charge as it stands. A client that locks once per connection and
//! never speaks again (a hung process, or one keeping slots on purpose)
//! so keeps `max_connections` slots taken long after every entry of its
//! expired, the case the idle close exists for.
//!
//! A server whose locker has a validity of 400 ms and an idle timeout of
//! 200 ms; a raw client authenticates, takes one lock and falls silent.
//! Its entry expires after 400 ms and its charge lapses with it; the
//! connection should be closed within a few idle timeouts after that.
//! Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::NetLocker;
use tokio::io::AsyncWriteExt;

use crate::lockers;
use crate::node::{start_over, TOKEN};
use crate::wire::{
    authenticate, closed_within, frame, lock_request, read_frame, response, OP_LOCK, REPLY_BOOL,
};

const VALIDITY: Duration = Duration::from_millis(400);
const IDLE: Duration = Duration::from_millis(200);

#[tokio::test]
async fn a_silent_client_whose_lock_expired_is_closed_for_idleness() {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = Some(IDLE);
    let locker = lockers::config_without_quarantine(VALIDITY);
    let node = start_over(locker, config).await;
    let locker = &node.locker;

    let (mut stream, _) = authenticate(&node.addr, TOKEN)
        .await
        .expect("authenticates");
    stream
        .write_all(&frame(&lock_request(1, OP_LOCK, "gone-quiet", &["held"])))
        .await
        .expect("request sent");
    let reply = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut stream, 64 * 1024))
        .await
        .expect("answered in time")
        .expect("a reply");
    assert_eq!(
        response(&reply),
        (1, &[REPLY_BOOL, 1][..]),
        "the lock is granted"
    );

    // Past the validity the entry is gone: the connection holds nothing.
    tokio::time::sleep(VALIDITY + IDLE).await;
    assert!(
        locker.locks().await.expect("listing").is_empty(),
        "the entry expired"
    );
    let closed = closed_within(&mut stream, 10 * IDLE).await;
    closed.expect(
        "a silent connection whose only lock expired is closed within ten idle timeouts after",
    );
}
