//! Reproduces a past break: on PostgreSQL, the one-statement grant read the epoch marker in its snapshot from before it waited for the resource's row, so a grant that waited for a reset of the table (every row deleted, the marker and the holder among them) was made at once after it, with no quarantine, while the holder the reset made the node forget still held the lock elsewhere (found by the randomized SQL safety test, seed 0, under load).
//!
//! A reset (`DELETE FROM entries`, as the randomized test's fault does)
//! runs in a session of its own and stays open while a grant of a held
//! name waits for the resource's row; then it commits. The grant must
//! see the reset, and refuse for the quarantine of the new epoch.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{LockArgs, NetLocker};
use sqlx::Connection;

use crate::both::config;
use crate::Servers;

fn args(uid: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec!["x".to_owned()].into(),
        owner: "test".into(),
        source: "tests/sql/a_grant_racing_a_reset_of_the_table_waits_out_the_quarantine.rs".into(),
        quorum: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_that_waited_for_a_reset_refuses_for_the_quarantine() {
    let Some(servers) = Servers::start() else {
        return;
    };
    for url in [servers.pg.clone(), servers.maria.clone()] {
        // A call timeout well past the scene's own waits: CI runs it beside
        // release builds, and a grant timed out before it saw the reset
        // would check nothing.
        let locker = SqlLocker::connect(
            &url,
            SqlConfig {
                call_timeout: Duration::from_secs(20),
                ..config("raced_", Duration::from_secs(5), Duration::from_secs(5))
            },
        )
        .await
        .expect("a database");
        // Past MariaDB's start-up quarantine.
        if let Some(left) = locker.quarantine_left().await.expect("a database") {
            tokio::time::sleep(left + Duration::from_millis(100)).await;
        }
        assert!(locker.lock(&args("first")).await.expect("a lock"), "{url}");
        // The reset, left open: it holds every row it deleted.
        sqlx::any::install_default_drivers();
        let mut reset = sqlx::AnyConnection::connect(&url)
            .await
            .expect("a connection of the test's own");
        sqlx::raw_sql("BEGIN")
            .execute(&mut reset)
            .await
            .expect("begin");
        sqlx::raw_sql("DELETE FROM raced_entries")
            .execute(&mut reset)
            .await
            .expect("the reset");
        let locker = Arc::new(locker);
        let waiting = {
            let locker = locker.clone();
            tokio::spawn(async move { locker.lock(&args("second")).await })
        };
        // The grant is asked and waits for the resource's row: the scene
        // goes on once the database shows it waiting, not after a guess of
        // how long that takes.
        waits_for_a_row_lock(&servers, &url, &waiting).await;
        sqlx::raw_sql("COMMIT")
            .execute(&mut reset)
            .await
            .expect("the reset commits");
        let granted = tokio::time::timeout(Duration::from_secs(30), waiting)
            .await
            .expect("the grant ends")
            .expect("the task");
        assert!(
            !matches!(granted, Ok(true)),
            "{url}: granted at once after a reset made the node forget the holder: {granted:?}"
        );
        let left = locker.quarantine_left().await.expect("a database");
        assert!(left.is_some(), "{url}: no quarantine after the reset");
    }
}

/// Returns once a statement on the scene's table waits for a row lock in
/// the database at `url` (asked as the server's superuser, who may see
/// every session); fails if the grant ends first, or after 15 s.
async fn waits_for_a_row_lock(
    servers: &Arc<Servers>,
    url: &str,
    waiting: &tokio::task::JoinHandle<Result<bool, quorum_lock::Error>>,
) {
    let probe = if url.starts_with("postgres") {
        "SELECT count(*) FROM pg_stat_activity \
         WHERE wait_event_type = 'Lock' AND query LIKE '%raced%';"
    } else {
        "SELECT count(*) FROM information_schema.INNODB_TRX \
         WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE '%raced%';"
    };
    let started = std::time::Instant::now();
    loop {
        assert!(
            !waiting.is_finished(),
            "{url}: the grant ended without waiting for the reset's rows"
        );
        let waits = servers.run(url, probe.to_owned()).await;
        if waits.trim() != "0" {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{url}: no statement waited for the reset's rows within 15 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
