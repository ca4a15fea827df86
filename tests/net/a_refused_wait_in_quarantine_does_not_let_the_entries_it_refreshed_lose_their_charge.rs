//! Reproduces a past break: in quarantine a wait of a uid that holds entries refreshes them and is refused; the refusal puts back the touch its reservation made, so the uid's charge lapses a validity before its refreshed entries expire, and the connection takes another lock past its per-connection limit while they still stand.
//!
//! docs/lock-servers.md ("A compromised client"): a client "can fill
//! limits, each of which bounds it: per connection 100,000 locks, ...".
//! src/net/ledger.rs: "every refresh of the uid goes through
//! [`Ledger::touch`] or [`Ledger::reserve`], after the locker's own
//! refresh, so a charge never lapses before the entries it pays for".
//!
//! In quarantine, `LocalLocker::grant_or_queue` refreshes the entries the
//! uid holds on the names it asks for and answers the quarantine error.
//! The server's `Session::ask` then calls `Ledger::undo`, which (since the
//! fix for review 90) restores the charge's touch to the time before the
//! reservation: the entries were refreshed now, their charge counts from
//! the last refresh the ledger saw. Once that is a lapse ago (validity +
//! 2 s), the next limit check prunes the charge while the entries stand
//! for up to another validity, and the connection's limit no longer counts
//! them.
//!
//! Here: a locker of a 4 s validity in a 60 s quarantine, a server that
//! lets a connection hold one lock. A client re-creates lock A on `x` with
//! a refresh naming its mode (charged), then, every 3 s, waits for A on
//! `x` and `y` (a set not charged yet): each wait refreshes `x` and is
//! refused with the quarantine. 7 s after the charge was made, `x` was
//! refreshed 1 s ago and stands 3 s more; a refresh naming its mode of lock
//! B, over the same connection, is let in past the limit of one lock.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::{LockMode, LockerConfig, NetLocker, Ticket};

use crate::node::{args, remote, reservation_with, start_over, TOKEN};

const VALIDITY: Duration = Duration::from_secs(4);

/// Whether `uid` holds an entry on `name` in the table.
fn holds(node: &crate::node::Node, uid: &str, name: &str) -> bool {
    node.locker
        .snapshot()
        .iter()
        .any(|e| e.uid == uid && e.resource == name)
}

async fn bounded<T>(what: &str, call: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .unwrap_or_else(|_| panic!("{what} answered within 5 s"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_wait_in_quarantine_does_not_let_the_entries_it_refreshed_lose_their_charge() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_entries_per_connection = 1;
    let node = start_over(
        LockerConfig {
            validity: VALIDITY,
            quarantine: Duration::from_secs(60),
        },
        config,
    )
    .await;
    node.locker.restart();
    let client = remote(&node).await;

    let a = args("lock-a", &["x".to_string()]);
    let b = args("lock-b", &["z".to_string()]);
    let start = tokio::time::Instant::now();

    // Re-created in quarantine, and charged to this connection.
    let _ = bounded("refresh A", client.refresh_mode(&a, LockMode::Write)).await;
    assert!(node.locker.is_quarantined(), "the locker is in quarantine");
    assert!(holds(&node, "lock-a", "x"), "the refresh re-created A");
    // The connection holds one lock: B is refused (its limit).
    let _ = bounded("refresh B", client.refresh_mode(&b, LockMode::Write)).await;
    assert!(
        !holds(&node, "lock-b", "z"),
        "with A charged, B is refused by the limit of one lock per connection"
    );

    // A waits on x and y: the table refreshes A's entry on x and answers
    // the quarantine. Every 3 s, within the validity of the last refresh.
    let wider = args("lock-a", &["x".to_string(), "y".to_string()]);
    let ticket = Ticket::now();
    for step in 1..=2u32 {
        tokio::time::sleep_until(start + 3 * Duration::from_secs(step.into())).await;
        let reply = bounded(
            "wait",
            client.lock_wait(&wider, LockMode::Write, &reservation_with(ticket)),
        )
        .await;
        assert!(reply.is_err(), "refused in quarantine: {reply:?}");
        assert!(holds(&node, "lock-a", "x"), "A's entry on x stands");
    }

    // 7 s in: A's entry on x was refreshed 1 s ago and stands until 10 s;
    // its charge, counted from 0 s, lapsed at 6 s.
    tokio::time::sleep_until(start + Duration::from_secs(7)).await;
    let _ = bounded("refresh B", client.refresh_mode(&b, LockMode::Write)).await;
    let both = holds(&node, "lock-a", "x") && holds(&node, "lock-b", "z");
    assert!(
        start.elapsed() < Duration::from_millis(9_500),
        "the scene ran in time ({:?})",
        start.elapsed()
    );
    assert!(
        !both,
        "one connection, allowed one lock, holds two live ones: A's entry on x (refreshed by \
         the refused waits in quarantine) lost its charge while it stands: {:#?}",
        node.locker.snapshot()
    );
}
