//! Reproduces a past break: a MariaDB user who may only create tables in the lockers' database makes the entries table first, exactly as schema() gives it but with `value` a generated column (`value blob AS (...) VIRTUAL`: same type, nullability and, as information_schema shows it, default); the shape check never looks at generation, so the lockers use it, and on a server whose sql_mode is not strict the leader's proclamation writes its stamp while the server ignores its value, and the election's leader is reported with mallory's value.
//!
//! docs/sql.md ("What it does not guarantee"): "a user that may only
//! create tables in the database could make them first: a locker refuses
//! lock tables that are not as `schema()` makes them" (every column's
//! type, collation, nullability and default), and such a user must not
//! forge an election's value. The check (src/sql/store/shape.rs,
//! `Store::mysql_shape`, over `Dialect::mysql_columns` in
//! src/sql/dialect.rs) reads `COLUMN_TYPE`, `COLLATION_NAME`,
//! `IS_NULLABLE` and `COLUMN_DEFAULT`, never `EXTRA`/`IS_GENERATED`: a
//! virtual column shows type `blob`, nullable, no default. The proclaim
//! (`UPDATE ... SET stamp = ?, value = ?`) is refused in strict mode, but
//! nothing the locker does sets strict mode: with the server's sql_mode
//! empty (a common setting for older applications) MariaDB only warns
//! (1906, "has been ignored"), the stamp is stored and the value read back
//! is the column's expression.
//!
//! Mallory has `CREATE` on the database and nothing else, and acts before
//! any locker's setup. A candidate campaigns with the value `honest`.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use quorum_lock::{Dsync, NetLocker};
use sqlx::Connection;

use crate::both::config;
use crate::sql_support::MariaServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_table_another_user_made_with_a_generated_value_column_is_not_used() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        poll_interval: Duration::from_secs(30),
        ..config("gv_", Duration::from_secs(60), Duration::ZERO)
    };
    let statements = quorum_lock::sql::schema(Backend::MySql, &settings()).expect("the statements");
    let entries = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE `gv_entries`"))
        .expect("the entries table's statement")
        .clone();
    let fence = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE IF NOT EXISTS `gv_fence`"))
        .expect("the fence table's statement")
        .clone();
    let value = "value blob,";
    assert!(
        entries.contains(value),
        "control: the value column: {entries}"
    );
    // Same type and nullability, and no default, as information_schema
    // shows it: only the generation differs.
    let planted = entries.replace(value, "value blob AS (CAST('mallory' AS BINARY)) VIRTUAL,");

    // A server that is not in strict mode (the lockers' sessions take the
    // global sql_mode, as the driver leaves it).
    server.sql("SET GLOBAL sql_mode = '';");
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
    let denied = sqlx::raw_sql("DELETE FROM gv_entries")
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
                said.contains("gv_entries") && said.contains("generated"),
                "the lockers refuse the table, naming it and its generated column: {said}"
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
         SEPARATOR ',') FROM gv_entries WHERE kind = 'h';",
    );
    assert_eq!(
        leader.as_ref().map(|l| l.value_lossy()),
        Some("honest".to_owned()),
        "the election's leader is reported with a value it never proclaimed: the entries \
         table mallory (CREATE only) made with `value` generated keeps her expression \
         in place of the leader's value, while its stamp is stored (leader: {leader:?}; \
         holders, kind:owner:stamp:value: {})",
        rows.trim()
    );
    leading.resign().await.ok();
}
