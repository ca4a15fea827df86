//! Reproduces a past break: a MariaDB user who may only create routines plants the grant procedure with a body that differs from this version's in the case of one letter; the setup's collated comparison takes it for ours and a held lock is granted twice.
//!
//! docs/sql.md ("One-round-trip calls"): "On MySQL and MariaDB a locker
//! uses a procedure only when its body (`ROUTINE_DEFINITION`) is this
//! version's ... found otherwise (made by another user where none was, or
//! replaced), it is dropped and made again when this user may, else not
//! used." The check (`mysql_routines_found`) compares
//! `ROUTINE_DEFINITION = ?`: the column is `utf8mb3_general_ci`, so a
//! body equal but for case passes. The lock table's `kind` is
//! `ascii_bin`: mallory's grant writes its holder as kind `'H'`, which
//! every other call ignores, so the name stays free to the full
//! transaction while the first locker holds it.
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
async fn a_grant_procedure_planted_with_a_body_equal_but_for_case_is_not_used() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        poll_interval: Duration::from_secs(30),
        ..config("cg_", Duration::from_secs(60), Duration::ZERO)
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
    let (ours, release) = (made("cg_grant_v1_0"), made("cg_release_v1_0"));
    let holder_row = "VALUES (p_name, p_uid, 'h', p_mode";
    assert!(
        ours.contains(holder_row),
        "control: the grant writes a holder of kind 'h'"
    );
    // One letter's case changed: the holder is written as kind 'H'.
    let planted = ours.replace(holder_row, "VALUES (p_name, p_uid, 'H', p_mode");
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
         AND ROUTINE_NAME = 'cg_grant_v1_0';",
    );
    let kinds = server.sql(
        "SELECT GROUP_CONCAT(kind ORDER BY kind SEPARATOR ',') FROM cg_entries WHERE name = 'res';",
    );
    assert!(
        stolen.is_err(),
        "`res` was granted to a second holder while the first holds it: the grant procedure \
         mallory (CREATE ROUTINE only) made before the lockers' setup differs from this \
         version's only in the case of one letter, and `ROUTINE_DEFINITION = ?` compares \
         without case, so the lockers took it for theirs (the grant procedure's definer: {}; kinds of the \
         rows of `res`: {})",
        definer.trim(),
        kinds.trim()
    );
    held.unlock().await.expect("released");
}
