//! Reproduces a past break: a MariaDB user who may only create routines plants the grant procedure with this version's body but its parameters' names in another order; the setup compares the body alone, takes it for ours, and a held lock is granted twice.
//!
//! docs/sql.md ("One-round-trip calls"): "On MySQL and MariaDB a locker
//! uses a procedure only when its body (`ROUTINE_DEFINITION`) is this
//! version's ... found otherwise (made by another user where none was, or
//! replaced), it is dropped and made again when this user may, else not
//! used." But what a procedure does is also its parameter list (the
//! body names the parameters; the call passes them by position), which
//! `mysql_routines_found` does not look at. Mallory's grant has this
//! version's body, `SQL SECURITY INVOKER`, and the same parameters with
//! the first and the ninth (`p_name`, `p_source`, both
//! `VARBINARY(1024)`) named the other way round: the grant of `res`
//! writes its rows under the caller's source instead of `res`, answers
//! granted, and `res` stays free to the full transaction while the first
//! locker holds it.
//!
//! The lockers' user may see others' routines (`SELECT` on `mysql.proc`),
//! as docs/sql.md asks of a user that did not make the procedures.
//!
//! Mallory has `CREATE ROUTINE` on the database and nothing else: no
//! right to the lock table, no `ALTER ROUTINE`, and she acts before any
//! locker's setup (the documented exception is a replacement after it).
//! She makes the release as schema() gives it, so that both are found
//! and neither is made again.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use quorum_lock::{Dsync, NetLocker, Timeouts};
use sqlx::Connection;

use crate::both::config;
use crate::sql_support::MariaServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_procedure_planted_with_this_versions_body_but_other_parameters_is_not_used() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        poll_interval: Duration::from_secs(30),
        ..config("cp_", Duration::from_secs(60), Duration::ZERO)
    };
    // This version's grant and release procedures, as schema() gives them.
    let statements = quorum_lock::sql::schema(Backend::MySql, &settings()).expect("the statements");
    let made = |name: &str| {
        statements
            .iter()
            .find(|s| s.starts_with(&format!("CREATE PROCEDURE `{name}`")))
            .expect("a procedure's statement")
            .clone()
    };
    let (ours, release) = (made("cp_grant_v1_0"), made("cp_release_v1_0"));
    let (first, ninth) = (
        "(IN p_name VARBINARY(1024),",
        "IN p_source VARBINARY(1024), IN p_started",
    );
    assert!(
        ours.contains(first) && ours.contains(ninth),
        "control: the grant takes the name first and the source ninth"
    );
    // The same body and types; the two parameters' names swapped.
    let planted = ours
        .replace(first, "(IN p_source VARBINARY(1024),")
        .replace(ninth, "IN p_name VARBINARY(1024), IN p_started");
    assert_ne!(planted, ours);

    server.sql(
        "CREATE USER 'mallory'@'127.0.0.1' IDENTIFIED BY 'mallory-pass';\n\
         GRANT CREATE ROUTINE ON quorum.* TO 'mallory'@'127.0.0.1';\n\
         GRANT SELECT ON mysql.proc TO 'quorum'@'127.0.0.1';",
    );
    sqlx::any::install_default_drivers();
    let mut mallory = sqlx::AnyConnection::connect(&server.url_as("mallory", "mallory-pass"))
        .await
        .expect("mallory connects");
    sqlx::raw_sql(&planted)
        .execute(&mut mallory)
        .await
        .expect("mallory makes the grant procedure before any locker (CREATE ROUTINE)");
    // The release as schema() gives it: both are found, none is made again.
    sqlx::raw_sql(&release)
        .execute(&mut mallory)
        .await
        .expect("mallory makes the release procedure (CREATE ROUTINE)");
    let _ = mallory.close().await;

    let node = |owner: &str| {
        let locker = SqlLocker::new(&server.url(), settings()).expect("a URL");
        Dsync::builder(vec![Arc::new(locker) as Arc<dyn NetLocker>])
            .owner(owner)
            .timeouts(Timeouts {
                wait_recheck: Duration::from_secs(20),
                ..Timeouts::default()
            })
            .build()
            .expect("a client")
    };
    let (holder, thief) = (node("holder"), node("thief"));
    let held = holder
        .rw_mutex(["res"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(10))
        .await
        .expect("res held by the holder");
    let stolen = thief
        .rw_mutex(["res"])
        .expect("a name")
        .lock_timeout(Duration::from_millis(800))
        .await;
    let definer = server.sql(
        "SELECT DEFINER FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = 'quorum' \
         AND ROUTINE_NAME = 'cp_grant_v1_0';",
    );
    let rows = server.sql(
        "SELECT GROUP_CONCAT(CONCAT(name, '/', kind) ORDER BY name, kind SEPARATOR ',') \
         FROM cp_entries WHERE kind <> 'e';",
    );
    assert!(
        stolen.is_err(),
        "`res` was granted to a second holder while the first holds it: the grant procedure \
         mallory (CREATE ROUTINE only) made before the lockers' setup differs from this \
         version's only in the order of its parameters' names, which the lockers' check \
         does not compare (the grant procedure's definer: {}; the table's rows, \
         name/kind: {})",
        definer.trim(),
        rows.trim()
    );
    held.unlock().await.expect("released");
}
