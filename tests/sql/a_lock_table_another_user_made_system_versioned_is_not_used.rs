//! Reproduces a past break: a MariaDB user who may only create tables in the lockers' database makes the entries table first, as schema() gives it but `WITH SYSTEM VERSIONING`; the shape check does not see the hidden period columns or the primary key's extra `row_end`, so the lockers use it, and every row they delete (holders with their uids, owners and sources, resource rows, places) stays in the table as history, forever.
//!
//! docs/sql.md ("What it does not guarantee"): "a user that may only
//! create tables in the database could make them first: a locker refuses
//! lock tables that are not as `schema()` makes them (the primary keys
//! `(name, uid, kind)` and `id` and no other constraint, every column's
//! type, …), naming the table and what differs"; src/sql/store/shape.rs:
//! "a MySQL or MariaDB locker uses no table whose primary keys, columns …
//! differ from `schema()`'s". A system-versioned table has the hidden
//! columns `row_start` and `row_end`, and its primary key is `(name, uid,
//! kind, row_end)`, but information_schema's `COLUMNS` and `STATISTICS`
//! (which the check reads) show neither. docs/sql.md ("Tables"): "A
//! resource's row is deleted with its last holder or place"; ("Time and
//! expiry"): expired rows are deleted, "No cron job is needed": on this
//! table no `DELETE` of the lockers removes a row.

use std::time::Duration;

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use quorum_lock::{LockArgs, NetLocker};
use sqlx::Connection;

use crate::both::config;
use crate::sql_shared::args_from;
use crate::sql_support::MariaServer;

fn settings() -> SqlConfig {
    config("sv_", Duration::from_secs(60), Duration::ZERO)
}

fn args(uid: &str) -> LockArgs {
    args_from(
        "tests/sql/a_lock_table_another_user_made_system_versioned_is_not_used.rs",
        uid,
        "x",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_system_versioned_entries_table_another_user_made_is_refused() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let statements = quorum_lock::sql::schema(Backend::MySql, &settings()).expect("statements");
    let entries = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE `sv_entries`"))
        .expect("the entries table's statement");
    let fence = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE IF NOT EXISTS `sv_fence`"))
        .expect("the fence table's statement");
    let planted = format!(
        "{} WITH SYSTEM VERSIONING",
        entries.trim_end().trim_end_matches(';')
    );

    // Mallory: CREATE on the lockers' database, nothing else.
    server.sql(
        "CREATE USER 'mallory'@'127.0.0.1' IDENTIFIED BY 'mallory-pass';\n\
         GRANT CREATE ON quorum.* TO 'mallory'@'127.0.0.1';",
    );
    sqlx::any::install_default_drivers();
    let mut mallory = sqlx::AnyConnection::connect(&server.url_as("mallory", "mallory-pass"))
        .await
        .expect("mallory connects");
    sqlx::raw_sql(&planted)
        .execute(&mut mallory)
        .await
        .expect("mallory makes the entries table before any locker (CREATE)");
    sqlx::raw_sql(fence)
        .execute(&mut mallory)
        .await
        .expect("mallory makes the fence table (CREATE)");
    let _ = mallory.close().await;

    let locker = match SqlLocker::connect(&server.url(), settings()).await {
        Err(refused) => {
            let said = refused.to_string();
            assert!(
                said.contains("sv_entries"),
                "the refusal names the table: {said}"
            );
            return;
        }
        Ok(locker) => locker,
    };
    // Used: show what it keeps.
    if let Some(left) = locker.quarantine_left().await.expect("a database") {
        tokio::time::sleep(left + Duration::from_millis(100)).await;
    }
    for uid in ["first", "second", "third"] {
        assert!(locker.lock(&args(uid)).await.expect("a lock"));
        assert!(locker.unlock(&args(uid)).await.expect("an unlock"));
    }
    let current = server.sql("SELECT COUNT(*) FROM sv_entries WHERE kind <> 'e';");
    let kept = server.sql(
        "SELECT GROUP_CONCAT(CONCAT(kind, ':', uid) ORDER BY row_end) \
         FROM sv_entries FOR SYSTEM_TIME ALL WHERE kind <> 'e';",
    );
    panic!(
        "the lockers used a system-versioned entries table another user made (CREATE only): \
         {} rows left in it now, but every row they deleted is kept as history: {}",
        current.trim(),
        kept.trim()
    );
}
