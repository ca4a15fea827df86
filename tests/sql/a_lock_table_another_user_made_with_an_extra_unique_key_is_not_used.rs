//! Reproduces a past break: a MariaDB user who may only create tables in the lockers' database makes the entries table first, exactly as schema() gives it plus a UNIQUE KEY (uid, kind); the shape check looks at the primary key only, so the lockers use it, a second name's resource row is never made while a first name's exists, and once that first name is released the one-round-trip grant finds the second name "free" and grants its held write lock to a second writer.
//!
//! docs/sql.md ("What it does not guarantee"): "a user that may only
//! create tables in the database could make them first: a locker refuses
//! lock tables that are not as `schema()` makes them". The check
//! (src/sql/store/shape.rs, `Store::mysql_shape`) compares the primary
//! keys, the columns and the engine, never the other unique keys. Every
//! resource row is `(name, '', 'r')`, so a unique key over `(uid, kind)`
//! lets one exist at a time: the upsert of another name's resource row
//! (`ON DUPLICATE KEY UPDATE`) lands on the existing one instead, and
//! the one-round-trip grant (`INSERT IGNORE` of the resource row, a new
//! row meaning a free name: src/sql/routines.rs) succeeds for a held
//! name as soon as the other name's row is gone.
//!
//! Mallory has `CREATE` on the database and nothing else, and acts before
//! any locker's setup. `first` takes `a`, `holder` takes `b` (its
//! resource row cannot be made), `first` lets `a` go, and a thief asks
//! for `b`.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use quorum_lock::{Dsync, NetLocker, Timeouts};
use sqlx::Connection;

use crate::both::config;
use crate::sql_support::MariaServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_table_another_user_made_with_an_extra_unique_key_is_not_used() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        poll_interval: Duration::from_secs(30),
        ..config("uk_", Duration::from_secs(60), Duration::ZERO)
    };
    let statements = quorum_lock::sql::schema(Backend::MySql, &settings()).expect("the statements");
    let entries = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE `uk_entries`"))
        .expect("the entries table's statement")
        .clone();
    let fence = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE IF NOT EXISTS `uk_fence`"))
        .expect("the fence table's statement")
        .clone();
    let key = "KEY uk_entries_by_uid (uid)";
    assert!(entries.contains(key), "control: the uid index: {entries}");
    // Every column, the primary key and the engine stay schema()'s.
    let planted = entries.replace(key, "UNIQUE KEY uk_entries_by_uid (uid, kind)");

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
    let denied = sqlx::raw_sql("DELETE FROM uk_entries")
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
    let (first, holder, thief) = (node("first"), node("holder"), node("thief"));
    // Refusing the table is safe, when the refusal names why.
    let a = match first
        .rw_mutex(["a"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(10))
        .await
    {
        Ok(held) => held,
        Err(refused) => {
            let said = refused.to_string();
            assert!(
                said.contains("uk_entries") && said.contains("key"),
                "the lockers refuse the table, naming it and its key: {said}"
            );
            return;
        }
    };
    let b = holder
        .rw_mutex(["b"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(10))
        .await
        .expect("`b` is free");
    tokio::time::timeout(Duration::from_secs(10), a.unlock())
        .await
        .expect("the unlock ends")
        .expect("`a` is released");
    let stolen = thief
        .rw_mutex(["b"])
        .expect("a name")
        .lock_timeout(Duration::from_millis(800))
        .await;
    let rows = server.sql(
        "SELECT GROUP_CONCAT(CONCAT(name, ':', kind, ':', owner) ORDER BY granted SEPARATOR ',') \
         FROM uk_entries;",
    );
    assert!(
        stolen.is_err(),
        "`b` was granted to a second writer while `holder` holds it: the entries table \
         mallory (CREATE only) made with an extra unique key over (uid, kind) kept `b` \
         without its resource row, so the one-round-trip grant took it for free \
         (rows, name:kind:owner: {})",
        rows.trim()
    );
    b.unlock().await.ok();
}
