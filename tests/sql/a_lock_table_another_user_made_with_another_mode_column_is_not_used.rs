//! Reproduces a past break: a MariaDB user who may only create tables in the lockers' database makes the entries table first, with schema()'s primary key but its `mode` an ENUM('', 'r', 'W') that ignores case; the lockers use it, every write holder reads back as mode `W`, which they take for a reader, and a held write lock is shared with a reader.
//!
//! docs/sql.md ("What it does not guarantee"): "a locker refuses lock
//! tables whose primary keys are not those `schema()` makes". The check
//! (src/sql/store/setup.rs, `Store::mysql_keys`) compares the key's
//! column names only; the columns themselves are whatever the table's
//! maker chose. The full transaction reads each holder's mode back as
//! text and takes anything but `w` for a reader
//! (src/sql/state.rs, `parse_mode`). An ENUM column whose members
//! are compared without case stores the locker's `w` as the member `W`
//! (no error, strict mode or not), and answers `W`.
//!
//! Mallory has `CREATE` on the database and nothing else, and acts before
//! any locker's setup. She makes the entries table as schema() gives it
//! but for the `mode` column, and the fence table as given. A holder
//! takes `res` for writing; a second client then asks to read it.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use quorum_lock::{Dsync, NetLocker, Timeouts};
use sqlx::Connection;

use crate::both::config;
use crate::sql_support::MariaServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_table_another_user_made_with_another_mode_column_is_not_used() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        poll_interval: Duration::from_secs(30),
        ..config("md_", Duration::from_secs(60), Duration::ZERO)
    };
    let statements = quorum_lock::sql::schema(Backend::MySql, &settings()).expect("the statements");
    let entries = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE `md_entries`"))
        .expect("the entries table's statement")
        .clone();
    let fence = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE IF NOT EXISTS `md_fence`"))
        .expect("the fence table's statement")
        .clone();
    let mode = "mode char(1) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',";
    assert!(
        entries.contains(mode),
        "control: the mode column: {entries}"
    );
    let planted = entries.replace(
        mode,
        "mode ENUM('', 'r', 'W') CHARACTER SET ascii COLLATE ascii_general_ci NOT NULL DEFAULT '',",
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
    let denied = sqlx::raw_sql("DELETE FROM md_entries")
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
    let (writer, reader) = (node("writer"), node("reader"));
    // Refusing the table is safe, when the refusal names why.
    let held = match writer
        .rw_mutex(["res"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(10))
        .await
    {
        Ok(held) => held,
        Err(refused) => {
            let said = refused.to_string();
            assert!(
                said.contains("md_entries") && said.contains("mode"),
                "the lockers refuse the table, naming it and its column: {said}"
            );
            return;
        }
    };
    let shared = reader
        .rw_mutex(["res"])
        .expect("a name")
        .read_timeout(Duration::from_millis(800))
        .await;
    let rows = server.sql(
        "SELECT GROUP_CONCAT(CONCAT(kind, ':', mode, ':', owner) ORDER BY granted SEPARATOR ',') \
         FROM md_entries WHERE name = 'res';",
    );
    assert!(
        shared.is_err(),
        "`res` was granted to a reader while a writer holds it: the entries table mallory \
         (CREATE only) made before the lockers' setup stores the mode `w` as `W`, which the \
         lockers read as a reader's (rows of `res`, kind:mode:owner: {})",
        rows.trim()
    );
    held.unlock().await.ok();
}
