//! Reproduces a past break: a MariaDB user who may only create tables in the lockers' database makes the entries table first, with a plain key where its primary key should be; the lockers use it as their own, and the one-round-trip grant, whose `INSERT IGNORE` of the resource's row now always succeeds, grants a held lock twice.
//!
//! docs/sql.md ("What it does not guarantee") names who can break a lock:
//! "a user with write access to the table", on MySQL and MariaDB "a user
//! who may alter or drop routines", and "the tables' owner", for which a
//! PostgreSQL locker warns by name. MySQL and MariaDB tables have no
//! owner: a user with `CREATE` on the database, and no right to read or
//! write any table, may make one, and the locker's setup
//! (src/sql/store/setup.rs, `Store::setup`) takes any table of that name
//! as its own (`SELECT 1 FROM entries WHERE 1 = 0`, or a `CREATE TABLE`
//! that fails with 1050), whatever its keys. The rules of docs/sql.md
//! ("Tables, isolation and locking") rest on the primary key `(name,
//! uid, kind)`: "a missing row means a free resource", and the grant
//! procedure's `INSERT IGNORE` of the resource's row is what finds it
//! there. Without the key every `INSERT IGNORE` inserts, and every grant
//! of a name by the one-round-trip procedure succeeds.
//!
//! Mallory has `CREATE` on the database and nothing else, and acts before
//! any locker's setup (as the planted routines of earlier findings did).
//! She makes the entries table as schema() gives it but for the primary
//! key (a plain key on the same columns), and the fence table as given.
//! Since then the lockers refuse such a table, naming it and its key.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use quorum_lock::{Dsync, NetLocker, Timeouts};
use sqlx::Connection;

use crate::both::config;
use crate::sql_support::MariaServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_table_another_user_made_without_its_primary_key_is_not_used() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        poll_interval: Duration::from_secs(30),
        ..config("pk_", Duration::from_secs(60), Duration::ZERO)
    };
    let statements = quorum_lock::sql::schema(Backend::MySql, &settings()).expect("the statements");
    let entries = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE `pk_entries`"))
        .expect("the entries table's statement")
        .clone();
    let fence = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE IF NOT EXISTS `pk_fence`"))
        .expect("the fence table's statement")
        .clone();
    let key = "PRIMARY KEY (name, uid, kind),";
    assert!(entries.contains(key), "control: the primary key: {entries}");
    let planted = entries.replace(key, "KEY pk_entries_by_row (name, uid, kind),");

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
    // Control: she may not read or write them.
    let denied = sqlx::raw_sql("DELETE FROM pk_entries")
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
    let (holder, thief) = (node("holder"), node("thief"));
    // Refusing the table is safe, when the refusal names why.
    let held = match holder
        .rw_mutex(["res"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(10))
        .await
    {
        Ok(held) => held,
        Err(refused) => {
            let said = refused.to_string();
            assert!(
                said.contains("primary key") && said.contains("pk_entries"),
                "the lockers refuse the table, naming it and its missing key: {said}"
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
        "SELECT GROUP_CONCAT(CONCAT(kind, ':', owner) ORDER BY granted SEPARATOR ',') \
         FROM pk_entries WHERE name = 'res';",
    );
    assert!(
        stolen.is_err(),
        "`res` was granted to a second holder while the first holds it: the entries table \
         mallory (CREATE only) made before the lockers' setup has no primary key, and the \
         lockers used it (rows of `res`, kind:owner: {})",
        rows.trim()
    );
    held.unlock().await.ok();
}
