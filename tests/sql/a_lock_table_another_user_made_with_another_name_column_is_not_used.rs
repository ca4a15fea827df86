//! Reproduces a past break: a MariaDB user who may only create tables in the lockers' database makes the entries table first, with schema()'s primary key (name, uid, kind) but `name` a CHAR column, which drops trailing spaces; the lockers use it, the holder of a name ending in a space reads back under another name, and the held lock is granted to a second writer.
//!
//! docs/sql.md ("What it does not guarantee"): "a locker refuses lock
//! tables whose primary keys are not those `schema()` makes". The check
//! (src/sql/store/setup.rs, `Store::mysql_keys`) compares the key's
//! column names only, not their types. Lock names are any text, and the
//! full transaction matches the rows it loads to the names asked for
//! byte for byte (src/sql/state.rs, `Table::load`). A CHAR column keeps
//! `job ` as `job` (no error, strict mode or not), finds it for `job `
//! (its collation pads), and answers `job`: the holder's row is loaded
//! and skipped.
//!
//! Mallory has `CREATE` on the database and nothing else, and acts before
//! any locker's setup. She makes the entries table as schema() gives it
//! but for the `name` column, and the fence table as given. A holder
//! takes `job ` for writing; a second client then asks to write it too.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use quorum_lock::{Dsync, NetLocker, Timeouts};
use sqlx::Connection;

use crate::both::config;
use crate::sql_support::MariaServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_table_another_user_made_with_another_name_column_is_not_used() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        poll_interval: Duration::from_secs(30),
        ..config("nm_", Duration::from_secs(60), Duration::ZERO)
    };
    let statements = quorum_lock::sql::schema(Backend::MySql, &settings()).expect("the statements");
    let entries = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE `nm_entries`"))
        .expect("the entries table's statement")
        .clone();
    let fence = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE IF NOT EXISTS `nm_fence`"))
        .expect("the fence table's statement")
        .clone();
    let name = "name varbinary(1024) NOT NULL,";
    assert!(
        entries.contains(name),
        "control: the name column: {entries}"
    );
    let planted = entries.replace(
        name,
        "name char(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,",
    );
    assert!(
        planted.contains("PRIMARY KEY (name, uid, kind)"),
        "control: schema()'s primary key is kept: {planted}"
    );

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
    sqlx::raw_sql(&fence)
        .execute(&mut mallory)
        .await
        .expect("mallory makes the fence table (CREATE)");
    let denied = sqlx::raw_sql("DELETE FROM nm_entries")
        .execute(&mut mallory)
        .await;
    assert!(
        denied.is_err(),
        "control: mallory has no right to the table's rows"
    );
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
    let (writer, thief) = (node("writer"), node("thief"));
    // Refusing the table is safe, when the refusal names why.
    let held = match writer
        .rw_mutex(["job "])
        .expect("a name")
        .lock_timeout(Duration::from_secs(10))
        .await
    {
        Ok(held) => held,
        Err(refused) => {
            let said = refused.to_string();
            assert!(
                said.contains("nm_entries") && said.contains("name"),
                "the lockers refuse the table, naming it and its column: {said}"
            );
            return;
        }
    };
    let stolen = thief
        .rw_mutex(["job "])
        .expect("a name")
        .lock_timeout(Duration::from_millis(800))
        .await;
    let rows = server.sql(
        "SELECT GROUP_CONCAT(CONCAT(kind, ':', mode, ':', owner) ORDER BY granted SEPARATOR ',') \
         FROM nm_entries WHERE name = 'job';",
    );
    assert!(
        stolen.is_err(),
        "`job ` was granted to a second writer while the first holds it: the entries table \
         mallory (CREATE only) made before the lockers' setup stores the name `job ` as \
         `job`, whose rows the lockers skip (rows of `job`, kind:mode:owner: {})",
        rows.trim()
    );
    held.unlock().await.ok();
}
