//! Reproduces a past break: a MariaDB user who may only create tables in the lockers' database makes the entries table first, exactly as schema() gives it but with DEFAULTs on `stamp` and `value`; the shape check compares no defaults, so the lockers use it, every new holder's row carries mallory's proclamation, and an election's leader is reported with her value, never the one it proclaimed.
//!
//! docs/sql.md ("What it does not guarantee"): "a user that may only
//! create tables in the database could make them first: a locker refuses
//! lock tables that are not as `schema()` makes them". The check
//! (src/sql/store/shape.rs, `Store::mysql_shape`) compares each column's
//! type, collation and nullability, not its default. A holder's row is
//! inserted without `stamp` and `value` (src/sql/dialect.rs,
//! `insert_holder`; the grant procedure in src/sql/routines.rs), so it
//! takes the table's defaults: a proclamation. A leader's own
//! proclamation replaces a stored one only when its stamp is higher
//! (src/sql/calls.rs, `proclaim`), and the planted stamp is higher than
//! any term the lockers draw, yet the call still answers that it stored
//! the value.
//!
//! Mallory has `CREATE` on the database and nothing else, and acts before
//! any locker's setup. A candidate campaigns with the value `honest`;
//! the election is then asked who leads.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use quorum_lock::{Dsync, NetLocker};
use sqlx::Connection;

use crate::both::config;
use crate::sql_support::MariaServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_table_another_user_made_with_other_column_defaults_is_not_used() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        poll_interval: Duration::from_secs(30),
        ..config("df_", Duration::from_secs(60), Duration::ZERO)
    };
    let statements = quorum_lock::sql::schema(Backend::MySql, &settings()).expect("the statements");
    let entries = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE `df_entries`"))
        .expect("the entries table's statement")
        .clone();
    let fence = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE IF NOT EXISTS `df_fence`"))
        .expect("the fence table's statement")
        .clone();
    let stamp = "stamp varchar(40) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',";
    let value = "value blob,";
    assert!(
        entries.contains(stamp) && entries.contains(value),
        "control: the stamp and value columns: {entries}"
    );
    // Same types, collations and nullability: only the defaults differ.
    // Term 10^19, above any fencing token the clock gives for centuries.
    let planted = entries
        .replace(
            stamp,
            "stamp varchar(40) CHARACTER SET ascii COLLATE ascii_bin NOT NULL \
             DEFAULT '1000000000000000000000000000000000000000',",
        )
        .replace(value, "value blob DEFAULT 'mallory',");

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
    let denied = sqlx::raw_sql("DELETE FROM df_entries")
        .execute(&mut mallory)
        .await;
    assert!(
        denied.is_err(),
        "control: mallory has no right to the table's rows"
    );
    let _ = mallory.close().await;

    let locker = SqlLocker::new(&server.url(), settings()).expect("a URL");
    let ds = Dsync::builder(vec![Arc::new(locker) as Arc<dyn NetLocker>])
        .owner("candidate")
        .build()
        .expect("a client");
    let election = ds.election("primary").expect("an election");
    // Refusing the table is safe, when the refusal names why.
    // One round, so that a refusal of the table comes back as the error.
    let mut leading = match tokio::time::timeout(
        Duration::from_secs(15),
        election.try_campaign(&b"honest"[..]),
    )
    .await
    .expect("the campaign ends")
    {
        Ok(leading) => leading,
        Err(refused) => {
            let said = refused.to_string();
            assert!(
                said.contains("df_entries") && said.contains("default"),
                "the lockers refuse the table, naming it and the defaults: {said}"
            );
            return;
        }
    };
    let leader = tokio::time::timeout(Duration::from_secs(10), election.leader())
        .await
        .expect("the read ends")
        .expect("a leader is read");
    let rows = server.sql(
        "SELECT GROUP_CONCAT(CONCAT(kind, ':', owner, ':', stamp, ':', COALESCE(value, '')) \
         SEPARATOR ',') FROM df_entries WHERE kind = 'h';",
    );
    assert_eq!(
        leader.as_ref().map(|l| l.value_lossy()),
        Some("honest".to_owned()),
        "the election's leader is reported with a value it never proclaimed: the entries \
         table mallory (CREATE only) made with defaults on stamp and value gives every \
         holder her proclamation, which the leader's own cannot replace (leader: {leader:?}; \
         holders, kind:owner:stamp:value: {})",
        rows.trim()
    );
    leading.resign().await.ok();
}
