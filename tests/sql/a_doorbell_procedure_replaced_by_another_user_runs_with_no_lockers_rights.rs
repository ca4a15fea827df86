//! Reproduces a past break: a MariaDB user who may alter routines, but not write the lock table, replaces the doorbell procedure and the lockers run its body with their own rights (a held lock deleted, granted twice).
//!
//! docs/sql.md: the routines are `SQL SECURITY INVOKER`, "they act with
//! the caller's rights, never their maker's" (src/sql/routines.rs), and
//! on PostgreSQL a locker "uses it only when its body is this version's
//! over that table, so two deployments in one database never reach each
//! other's tables". On MySQL and MariaDB a locker looks the doorbell
//! procedure up by its name only (`mysql_ring_found`: a row of
//! `information_schema.ROUTINES`) and calls it after every hand-off to
//! another locker. So a user of the same database who has no right to
//! the lock table, only `CREATE ROUTINE, ALTER ROUTINE` on the database
//! (a deployment's or a migration tool's user, say), drops the procedure
//! and makes one of the same name, `SQL SECURITY INVOKER`, whose body
//! deletes the rows of a lock someone holds: the next hand-off runs it as
//! the locker's user, and the lock is granted to a second holder. The
//! "user with write access to the table" of "What it does not guarantee"
//! is the locker's user here, not the attacker.
//!
//! Now a locker uses a procedure only when its body is this version's, as
//! its setup finds it (here the lockers that ring are set up after the
//! replacement). One replaced after a locker's setup is not seen: the
//! docs ("What it does not guarantee") give `ALTER ROUTINE` on the tables'
//! database to the lockers' user alone.

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use sqlx::Connection;

use crate::both::config;
use crate::mallory::{as_mallory, mallory_with, refused_to_mallory};
use crate::sql_support::MariaServer;

const PLANTED: &str = "CREATE PROCEDURE `pl_ring_v2_0`(IN p_text VARBINARY(512))\n\
     SQL SECURITY INVOKER\n\
     BEGIN\n  \
       DELETE FROM pl_entries WHERE name = 'other';\n  \
       SELECT 0 AS answer;\n\
     END";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_doorbell_procedure_replaced_by_another_user_runs_with_no_lockers_rights() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let node = |owner: &str| {
        let locker = SqlLocker::new(
            &server.url(),
            SqlConfig {
                poll_interval: Duration::from_secs(30),
                ..config("pl_", Duration::from_secs(60), Duration::ZERO)
            },
        )
        .expect("a URL");
        crate::sql_shared::client_of(locker, owner)
    };
    let (holder, waiter, keeper, thief) = (
        node("holder"),
        node("waiter"),
        node("keeper"),
        node("thief"),
    );
    // The keeper holds `other`; the tables and this version's procedures,
    // the doorbell's included, are made by the lockers' own user.
    let kept = keeper
        .rw_mutex(["other"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(10))
        .await
        .expect("other held by the keeper");
    let found = server.sql(
        "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = 'quorum' \
         AND ROUTINE_NAME = 'pl_ring_v2_0';",
    );
    assert_eq!(
        found.trim(),
        "1",
        "control: the doorbell procedure was made"
    );

    // Another user of the database: may make and alter routines there,
    // may not touch the lock table.
    let mut mallory = mallory_with(&server, "CREATE ROUTINE, ALTER ROUTINE").await;
    refused_to_mallory(
        &mut mallory,
        "DELETE FROM pl_entries WHERE name = 'other'",
        "mallory may not write the lock table herself",
    )
    .await;
    as_mallory(
        &mut mallory,
        "DROP PROCEDURE `pl_ring_v2_0`",
        "mallory drops the doorbell procedure (ALTER ROUTINE)",
    )
    .await;
    as_mallory(
        &mut mallory,
        PLANTED,
        "mallory makes one of her own under its name (CREATE ROUTINE)",
    )
    .await;
    let _ = mallory.close().await;

    // An ordinary hand-off between two lockers: the releasing call rings
    // the waiter's doorbell, calling the procedure of that name.
    let held = holder
        .rw_mutex(["res"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(10))
        .await
        .expect("res held");
    let mutex = waiter.rw_mutex(["res"]).expect("a name");
    let wait = tokio::spawn(async move { mutex.lock_timeout(Duration::from_secs(25)).await });
    tokio::time::sleep(Duration::from_millis(700)).await;
    held.unlock().await.expect("res released");
    let granted = tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .expect("bounded")
        .expect("the wait task")
        .expect("the waiter granted res");
    // The rings run in the background after the release's commit.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let stolen = thief
        .rw_mutex(["other"])
        .expect("a name")
        .lock_timeout(Duration::from_millis(800))
        .await;
    let rows = server.sql("SELECT COUNT(*) FROM pl_entries WHERE name = 'other';");
    assert!(
        stolen.is_err(),
        "`other` was granted to a second holder while the keeper holds it: a procedure that \
         mallory (no right to the lock table, only CREATE/ALTER ROUTINE on the database) put \
         in place of the doorbell's was run by a locker with the locker's rights, and deleted \
         the keeper's rows ({} rows of `other` now, the thief's own: resource and holder)",
        rows.trim()
    );
    granted.unlock().await.expect("released");
    kept.unlock().await.expect("released");
}
