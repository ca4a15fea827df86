//! Reproduces a past break: a place that expired beside an entry of its uid kept its set's charge, which every refresh of the uid's lock then kept alive, so the connection was charged for a place the table no longer kept.
//!
//! docs/lock-servers.md: "A place is charged as a lock is while its
//! connection keeps it", and a charge goes when the place ends without a
//! grant. `u` holds "a" and waits, for 300 ms, for "a" and "b" (held by
//! another uid). The place expires; the server settles it at the
//! connection's next wait. Its set's charge stayed because `u` held an
//! entry on "a", although `u`'s own lock on "a" pays for that entry, and
//! each refresh of `u` touched the orphaned charge with the rest. Real
//! time (sockets), every wait bounded. A second scene renews the wait
//! over another connection (a waiter that reconnected) before it expires.
#![cfg(feature = "net")]

use std::future::Future;
use std::time::Duration;

use quorum_lock::net::{RemoteLocker, ServerConfig};
use quorum_lock::{LockMode, NetLocker, Ticket, WaitArgs, WaitReply};

use crate::node::{args, remote, reservation, start, TOKEN};

async fn answer<T>(what: &str, call: impl Future<Output = Result<T, quorum_lock::Error>>) -> T {
    tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within 5 s"))
        .unwrap_or_else(|err| panic!("{what}: {err}"))
}

/// `u` holds "a" and waits for "a" and "b" for 300 ms, over its first
/// connection and then, with `renewed`, over a second one; once the place
/// expired and each connection settled it, the server charges what it did
/// before the wait.
async fn scene(renewed: bool) {
    let node = start(ServerConfig::new(TOKEN)).await;
    let (client, other) = (remote(&node).await, remote(&node).await);
    let mut waiters: Vec<RemoteLocker> = vec![client];
    if renewed {
        waiters.push(remote(&node).await);
    }
    let held = args("u", &["a".to_owned()]);
    assert!(answer("u's lock on a", waiters[0].lock(&held)).await);
    let theirs = args("v", &["b".to_owned()]);
    assert!(answer("v's lock on b", other.lock(&theirs)).await);
    let both = args("u", &["a".to_owned(), "b".to_owned()]);
    let before = node.stats.lock_bytes();
    let short = WaitArgs {
        ticket: Ticket::now(),
        place_ttl: Duration::from_millis(300),
        wake: None,
    };
    for waiter in &waiters {
        let waited = answer("u's wait", waiter.lock_wait(&both, LockMode::Write, &short)).await;
        assert!(
            matches!(waited, WaitReply::Queued | WaitReply::Refused),
            "{waited:?}"
        );
        assert!(node.stats.lock_bytes() > before, "the place is charged");
    }

    // A connection looks for its expired places at most once a second.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    // Each connection's next wait settles its expired place; its own lock
    // (on a free name, granted at once) is released again.
    for (i, waiter) in waiters.iter().enumerate() {
        let free = args(&format!("x{i}"), &[format!("c{i}")]);
        let wait = reservation();
        let reply = answer("x's wait", waiter.lock_wait(&free, LockMode::Write, &wait)).await;
        assert_eq!(reply, WaitReply::Granted);
        assert!(answer("x's release", waiter.unlock(&free)).await);
    }
    for _ in 0..3 {
        assert!(answer("u's refresh", waiters[0].refresh(&held)).await);
    }
    assert_eq!(node.locker.waiting(), 0, "the place expired from the table");
    assert_eq!(
        node.stats.lock_bytes(),
        before,
        "after u's place on a and b expired (asked over {} connection(s)), the server still \
         charges its bytes (u's lock on a and v's on b were charged {before} bytes before the \
         wait)",
        waiters.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_place_beside_its_uids_lock_is_not_charged_while_the_lock_is_refreshed() {
    scene(false).await;
}

/// Reproduces a past break: a wait renewed over a second connection found its set charged, so that connection's place did not know the charge was the place's own, and kept it beside the uid's lock after it expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_place_renewed_over_another_connection_is_not_charged_beside_its_uids_lock() {
    scene(true).await;
}
