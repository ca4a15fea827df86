//! "mallory": another MariaDB user, with only the rights a test gives her.
//! The tests of tables and procedures that someone else made first, for a
//! locker to find, plant them as her.

use sqlx::{AnyConnection, Connection};

use crate::sql_support::MariaServer;

/// Creates mallory with `rights` (e.g. `CREATE`) on the `quorum` database
/// and connects as her.
pub async fn mallory_with(server: &MariaServer, rights: &str) -> AnyConnection {
    server.sql(&format!(
        "CREATE USER 'mallory'@'127.0.0.1' IDENTIFIED BY 'mallory-pass';\n\
         GRANT {rights} ON quorum.* TO 'mallory'@'127.0.0.1';"
    ));
    sqlx::any::install_default_drivers();
    AnyConnection::connect(&server.url_as("mallory", "mallory-pass"))
        .await
        .expect("mallory connects")
}

/// Runs `sql` as mallory; it must succeed (`what` she does, for the
/// failure's message).
pub async fn as_mallory(mallory: &mut AnyConnection, sql: &str, what: &str) {
    sqlx::raw_sql(sql)
        .execute(mallory)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// The control that `sql` is refused to mallory: she has no right to the
/// rows of the tables she made (`why`, for the failure's message).
pub async fn refused_to_mallory(mallory: &mut AnyConnection, sql: &str, why: &str) {
    let denied = sqlx::raw_sql(sql).execute(mallory).await;
    assert!(denied.is_err(), "control: {why}");
}
