//! Reproduces a past break: a MariaDB account whose name differs from the lockers' user only in case ('Quorum' beside 'quorum') plants the grant procedure with swapped parameter names; `DEFINER = CURRENT_USER()` compares under utf8mb3_general_ci, takes her for the lockers' user, and a held lock is granted twice.
//!
//! docs/sql.md ("One-round-trip calls"): "On MySQL and MariaDB a locker
//! uses a procedure only when the locker's user made it (its `DEFINER`),
//! with this version's body ... found otherwise (made by another user ...)
//! it is dropped and made again when this user may, else not used."
//! `mysql_routines_found` checks `DEFINER = CURRENT_USER()`, but both
//! sides are `utf8mb3_general_ci`: case and accents are ignored, while
//! MariaDB account names are compared byte for byte (`'Quorum'` and
//! `'quorum'` are two accounts). Mallory is `'Quorum'@'127.0.0.1'`, with
//! `CREATE ROUTINE` on the database and nothing else; she acts before any
//! locker's setup (the documented exception is a replacement after it).
//! Her grant has this version's body and `SQL SECURITY INVOKER`, the
//! first and ninth parameters' names swapped (as in the earlier break);
//! the lockers' user may see others' routines (`SELECT` on `mysql.proc`).

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use quorum_lock::{Dsync, NetLocker, Timeouts};
use sqlx::Connection;

use crate::both::config;
use crate::sql_support::MariaServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_procedure_of_a_user_named_as_ours_but_for_case_is_not_used() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        poll_interval: Duration::from_secs(30),
        ..config("cq_", Duration::from_secs(60), Duration::ZERO)
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
    let (ours, release) = (made("cq_grant_v1_0"), made("cq_release_v1_0"));
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
        "CREATE USER 'Quorum'@'127.0.0.1' IDENTIFIED BY 'mallory-pass';\n\
         GRANT CREATE ROUTINE ON quorum.* TO 'Quorum'@'127.0.0.1';\n\
         GRANT SELECT ON mysql.proc TO 'quorum'@'127.0.0.1';",
    );
    sqlx::any::install_default_drivers();
    let mut mallory = sqlx::AnyConnection::connect(&server.url_as("Quorum", "mallory-pass"))
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
         AND ROUTINE_NAME = 'cq_grant_v1_0';",
    );
    let rows = server.sql(
        "SELECT GROUP_CONCAT(CONCAT(name, '/', kind) ORDER BY name, kind SEPARATOR ',') \
         FROM cq_entries WHERE kind <> 'e';",
    );
    assert!(
        stolen.is_err(),
        "`res` was granted to a second holder while the first holds it: the grant procedure \
         made before the lockers' setup by 'Quorum'@'127.0.0.1' (CREATE ROUTINE only), \
         another account than the lockers' 'quorum'@'127.0.0.1', was taken for theirs: \
         DEFINER = CURRENT_USER() ignores case (the grant procedure's definer: {}; the table's rows, \
         name/kind: {})",
        definer.trim(),
        rows.trim()
    );
    held.unlock().await.expect("released");
}
