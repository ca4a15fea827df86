//! A waiter that asks again over another connection (it reconnected)
//! takes its place there; what its first connection left in the lock
//! server's table must still be counted and charged, or go.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{args, names, remote, reservation, start, TOKEN};
use quorum_lock::net::ServerConfig;
use quorum_lock::{LockMode, NetLocker, WaitReply};

/// Each step: a fresh connection waits with uid `w{step}` on 201 names
/// (a reservation; "held" is held); a second, long-lived connection asks
/// again with the same uid and ticket on one other held name (the waiter
/// reconnected), then releases the uid; the first connection closes. The
/// table must not keep the first connection's places with nobody
/// counting or charging them: with `max_waiters_per_connection` at 2 on
/// every connection, the places standing after the steps stay bounded.
/// (A past break: 2,010 places stood, counted by no open connection.)
#[tokio::test]
async fn places_left_by_a_waiters_old_connection_do_not_pile_up_after_it_reconnected() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_waiters_per_connection = 2;
    config.max_bytes_per_connection = 64 << 20;
    let node = start(config).await;
    let holder = remote(&node).await;
    for name in ["held", "held-2"] {
        assert!(holder
            .lock(&args("holder", &[name.to_string()]))
            .await
            .unwrap());
    }
    let holders = node.stats.lock_bytes();
    let second = remote(&node).await;
    for step in 0..10 {
        let uid = format!("w{step:03}");
        let wait = reservation();
        let first = remote(&node).await;
        let reply = first
            .lock_wait(&args(&uid, &names(step)), LockMode::Write, &wait)
            .await;
        assert_eq!(reply.unwrap(), WaitReply::Refused, "step {step}");
        let again = second
            .lock_wait(&args(&uid, &["held-2".to_string()]), LockMode::Write, &wait)
            .await;
        assert_eq!(again.unwrap(), WaitReply::Refused, "step {step}");
        let released = second.unlock(&args(&uid, &["held-2".to_string()])).await;
        assert!(released.is_ok(), "{released:?}");
        drop(first);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let places = node.locker.waiting();
    let charged = node.stats.lock_bytes() - holders;
    // Whether those places stand in line: once "held" is free, a newcomer
    // waits behind them.
    assert!(holder
        .unlock(&args("holder", &["held".to_string()]))
        .await
        .unwrap());
    let newcomer = remote(&node)
        .await
        .lock_wait(
            &args("newcomer", &["held".to_string()]),
            LockMode::Write,
            &reservation(),
        )
        .await;
    assert!(
        places <= 2 * 201,
        "after 10 reconnected waiters released, the table keeps {places} places ({} requests \
         of 201 names) that no open connection counts as its places; {charged} lock bytes \
         charged; a newcomer on the freed name got {newcomer:?}",
        places / 201
    );
}
