//! Reproduces a past break: on MariaDB, one waiter on two names (one free, one held) made its locker run a locking turn-taking transaction at every poll (about 20 a second), where docs/sql.md promises one SELECT without locks per interval and a turn-taking call only when the waiter's turn has come.
//!
//! The poller took the waiter's turn on each name where it stood first,
//! though a waiter is granted all its names or none: its turn comes when
//! it stands first on every one of them.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::SqlLocker;
use quorum_lock::{Dsync, NetLocker};

use crate::both::config;
use crate::sql_support::MariaServer;

fn commits(server: &MariaServer) -> u64 {
    let row = server.sql("SHOW GLOBAL STATUS LIKE 'Com_commit'");
    row.split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a commit count in {row:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_on_a_free_and_a_held_name_takes_no_turn_until_both_are_its() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let node = |owner: &str| {
        let locker = SqlLocker::new(
            &server.url(),
            config("two_names_", Duration::from_secs(60), Duration::ZERO),
        )
        .expect("a URL");
        Dsync::builder(vec![Arc::new(locker) as Arc<dyn NetLocker>])
            .owner(owner)
            .build()
            .expect("a client")
    };
    let (holder, waiter) = (node("holder"), node("waiter"));
    let held = holder
        .rw_mutex(["b"])
        .expect("a name")
        .lock()
        .await
        .expect("b held");
    let mutex = waiter.rw_mutex(["a", "b"]).expect("names");
    let wait = tokio::spawn(async move { mutex.lock_timeout(Duration::from_secs(4)).await });
    // In line on both names by now.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = commits(&server);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let during = commits(&server) - before;
    held.unlock().await.expect("b released");
    let granted = tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("bounded")
        .expect("the wait task");
    // About two re-checks by the waiter's coordinator in two seconds, and
    // a refresh or two; not a transaction per poll (40).
    assert!(
        during <= 10,
        "{during} transactions committed in 2 s while one waiter waited on a held name"
    );
    granted
        .expect("granted once b was released")
        .unlock()
        .await
        .expect("released");
}
