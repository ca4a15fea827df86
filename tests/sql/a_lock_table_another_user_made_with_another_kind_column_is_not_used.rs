//! Reproduces a past break: a MariaDB user who may only create tables in the lockers' database makes the entries table first, with schema()'s primary key (name, uid, kind) but `kind` an ENUM('e', 'H', 'q', 'r') that ignores case; the lockers use it, every holder's row reads back as kind `H`, which they skip, and a held write lock is granted to a second writer.
//!
//! docs/sql.md ("What it does not guarantee"): "a locker refuses lock
//! tables whose primary keys are not those `schema()` makes". The check
//! (src/sql/store/setup.rs, `Store::mysql_keys`) compares the key's
//! column names only, not their types. The full transaction reads each
//! row's kind back as text and skips a row whose kind is neither `h` nor
//! `q` (src/sql/state.rs, `Table::load`). An ENUM column whose members
//! are compared without case stores the locker's `h` as the member `H`
//! (no error, strict mode or not) and answers `H`, while the epoch
//! marker's `e` is kept as it is, so no quarantine follows.
//!
//! Mallory has `CREATE` on the database and nothing else, and acts before
//! any locker's setup. She makes the entries table as schema() gives it
//! but for the `kind` column, and the fence table as given. A holder
//! takes `res` for writing; a second client then asks to write it too.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use quorum_lock::{Dsync, NetLocker, Timeouts};
use sqlx::Connection;

use crate::both::config;
use crate::sql_support::MariaServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_table_another_user_made_with_another_kind_column_is_not_used() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        poll_interval: Duration::from_secs(30),
        ..config("kd_", Duration::from_secs(60), Duration::ZERO)
    };
    let statements = quorum_lock::sql::schema(Backend::MySql, &settings()).expect("the statements");
    let entries = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE `kd_entries`"))
        .expect("the entries table's statement")
        .clone();
    let fence = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE IF NOT EXISTS `kd_fence`"))
        .expect("the fence table's statement")
        .clone();
    let kind = "kind char(1) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,";
    assert!(
        entries.contains(kind),
        "control: the kind column: {entries}"
    );
    let planted = entries.replace(
        kind,
        "kind ENUM('e', 'H', 'q', 'r') CHARACTER SET ascii COLLATE ascii_general_ci NOT NULL,",
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
    let denied = sqlx::raw_sql("DELETE FROM kd_entries")
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
        .rw_mutex(["res"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(10))
        .await
    {
        Ok(held) => held,
        Err(refused) => {
            let said = refused.to_string();
            assert!(
                said.contains("kd_entries") && said.contains("kind"),
                "the lockers refuse the table, naming it and its column: {said}"
            );
            return;
        }
    };
    let stolen = thief
        .rw_mutex(["res"])
        .expect("a name")
        .lock_timeout(Duration::from_millis(800))
        .await;
    let rows = server.sql(
        "SELECT GROUP_CONCAT(CONCAT(kind, ':', mode, ':', owner) ORDER BY granted SEPARATOR ',') \
         FROM kd_entries WHERE name = 'res';",
    );
    assert!(
        stolen.is_err(),
        "`res` was granted to a second writer while the first holds it: the entries table \
         mallory (CREATE only) made before the lockers' setup stores the kind `h` as `H`, \
         which the lockers skip (rows of `res`, kind:mode:owner: {})",
        rows.trim()
    );
    held.unlock().await.ok();
}
