//! docs/lock-servers.md, "Connection slots": a connection silent for
//! `idle_timeout` that holds nothing is closed, and "a lock that expired
//! without a release counts for the validity after the connection's last
//! lock was granted or refreshed (released since or not), then no more".
//!
//! A server over a locker of a 3 s validity, idle timeout 300 ms. A raw
//! client takes a lock on "mine" at `granted`; 2.5 s later it takes a lock
//! of another uid on "other" and releases it at once, then falls silent.
//! Its lock on "mine" expires unreleased at `granted` + 3 s, and the
//! connection holds nothing from then; the server judges it by when any
//! of its charges was last made or touched (`Usage::touched`, here the
//! lock on "other"), so it is closed once a validity has passed since
//! that grant, at `granted` + 5.5 s, and not kept longer. (A review asked
//! for the close at `granted` + 3 s: that would need the newest touch of
//! each connection's remaining charges, which the server does not index;
//! the docs say what it does.) Bounded: each wait 5 s.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use tokio::time::Instant;

use crate::lockers;
use crate::node::{start_over, TOKEN};
use crate::wire::{
    authenticate_as, call, closed_within, lock_request, OP_LOCK, OP_UNLOCK, REPLY_BOOL, VERSION_6,
};

const VALIDITY: Duration = Duration::from_secs(3);
const IDLE: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_whose_lock_expired_is_closed_a_validity_after_its_last_grant() {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = Some(IDLE);
    let locker = lockers::config_without_quarantine(VALIDITY);
    let node = start_over(locker, config).await;
    let (mut client, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let granted = Instant::now();
    assert_eq!(
        call(
            &mut client,
            1,
            &lock_request(1, OP_LOCK, "mine-uid", &["mine"])
        )
        .await,
        [REPLY_BOOL, 1]
    );
    tokio::time::sleep_until(granted + Duration::from_millis(2_500)).await;
    let other = |id, op| lock_request(id, op, "other-uid", &["other"]);
    assert_eq!(
        call(&mut client, 2, &other(2, OP_LOCK)).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(&mut client, 3, &other(3, OP_UNLOCK)).await,
        [REPLY_BOOL, 1]
    );
    let last_grant = Instant::now();
    // Silent from here. Its lock on "mine" expires at `granted` + 3 s; the
    // connection is closed a validity after its last grant, give or take
    // a few idle timeouts.
    let closed = closed_within(&mut client, VALIDITY + 10 * IDLE).await;
    assert!(
        closed.is_ok(),
        "{:?} after its last lock was granted (validity 3 s, idle timeout 300 ms), a silent \
         connection whose lock on \"mine\" expired, and whose other lock it released, is still \
         open",
        last_grant.elapsed()
    );
}
