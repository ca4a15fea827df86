//! A waiter on MariaDB whose turn a call of another locker (another
//! process, in effect: its own pool and channel) passes on is woken at
//! once by that locker's ring of its doorbell, not at its next poll or
//! re-check (docs/sql.md, "Waiting").

use std::time::{Duration, Instant};

use quorum_lock::sql::{SqlConfig, SqlLocker};

use crate::both::config;

use crate::sql_support::MariaServer;

fn status(server: &MariaServer, name: &str) -> u64 {
    let row = server.sql(&format!("SHOW GLOBAL STATUS LIKE '{name}'"));
    row.split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a count in {row:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_is_woken_by_the_release_of_another_locker_well_before_its_poll() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    // Neither the poll (30 s) nor the waiter's re-check (about 16 s) comes
    // within the bound below: only a push does.
    let node = |owner: &str| {
        let locker = SqlLocker::new(
            &server.url(),
            SqlConfig {
                poll_interval: Duration::from_secs(30),
                ..config("bell_", Duration::from_secs(60), Duration::ZERO)
            },
        )
        .expect("a URL");
        crate::sql_shared::client_of(locker, owner)
    };
    let (holder, waiter) = (node("holder"), node("waiter"));
    for round in 0..3 {
        let held = holder
            .rw_mutex(["res"])
            .expect("a name")
            .lock()
            .await
            .expect("res held");
        let mutex = waiter.rw_mutex(["res"]).expect("a name");
        let wait = tokio::spawn(async move { mutex.lock_timeout(Duration::from_secs(25)).await });
        // In line, and its doorbell asleep, by now.
        tokio::time::sleep(Duration::from_millis(700)).await;
        let kills = status(&server, "Com_kill");
        let released = Instant::now();
        held.unlock().await.expect("res released");
        let granted = tokio::time::timeout(Duration::from_secs(30), wait)
            .await
            .expect("bounded")
            .expect("the wait task")
            .expect("granted once res was released");
        let took = released.elapsed();
        let rung = status(&server, "Com_kill") - kills;
        assert!(
            took < Duration::from_secs(5) && rung >= 1,
            "round {round}: the waiter was granted {took:?} after the release, with {rung} \
             doorbell rings; its poll is 30 s and its re-check about 16 s"
        );
        granted.unlock().await.expect("released");
    }
}
