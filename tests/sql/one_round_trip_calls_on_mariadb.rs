//! On MariaDB, a lock of a free name and its release are one round trip
//! each (stored procedures made with the tables), counted from the
//! server's general log; and a locker whose user may not run them still
//! locks and releases, by the transaction.

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{LockArgs, NetLocker};

use crate::both::config;
use crate::sql_shared::args_from;
use crate::sql_shared::only_holders_release_and_readers_share;
use crate::sql_support::MariaServer;

fn args(uid: &str, name: &str) -> LockArgs {
    args_from("tests/sql/one_round_trip_calls_on_mariadb.rs", uid, name)
}

fn settings(prefix: &str) -> SqlConfig {
    config(prefix, Duration::from_secs(60), Duration::ZERO)
}

/// The statements the locker's user sent since the general log was
/// emptied, but for the settings and start-up reads of a connection the
/// pool opened (once per connection, not per call).
fn statements(server: &MariaServer) -> Vec<String> {
    server
        .sql(
            "SELECT REPLACE(REPLACE(CONVERT(argument USING utf8mb4), '\\n', ' '), '\\t', ' ') \
             FROM mysql.general_log WHERE command_type IN ('Execute', 'Query') \
             AND user_host LIKE 'quorum%'",
        )
        .lines()
        .filter(|line| !line.trim().is_empty())
        .filter(|line| {
            !(line.starts_with("SET ")
                || line.starts_with("SHOW GLOBAL STATUS")
                || line.starts_with("SELECT CAST(UNIX_TIMESTAMP(SYSDATE(3))"))
        })
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_and_its_unlock_on_a_free_name_are_two_statements() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let locker = SqlLocker::connect(&server.url(), settings("rt_"))
        .await
        .expect("a database");
    // Past the set-up (version, tables, procedures) and MariaDB's start-up
    // quarantine, which the grant checks.
    if let Some(left) = locker.quarantine_left().await.expect("a database") {
        tokio::time::sleep(left + Duration::from_millis(100)).await;
    }
    assert!(locker.lock(&args("warm", "warm-up")).await.expect("lock"));
    assert!(locker
        .unlock(&args("warm", "warm-up"))
        .await
        .expect("unlock"));

    server.sql(
        "SET GLOBAL log_output = 'TABLE'; TRUNCATE mysql.general_log; SET GLOBAL general_log = 1;",
    );
    assert!(locker.lock(&args("u1", "free")).await.expect("lock"));
    assert!(locker.unlock(&args("u1", "free")).await.expect("unlock"));
    server.sql("SET GLOBAL general_log = 0;");
    let ran = statements(&server);
    assert_eq!(
        ran.len(),
        2,
        "a lock and its unlock of a free name sent {} statements: {ran:#?}",
        ran.len()
    );
    assert!(
        ran.iter().all(|s| s.starts_with("CALL ")),
        "each a call of a procedure: {ran:#?}"
    );

    // Released for good, and no row left behind.
    assert!(locker.lock(&args("u2", "free")).await.expect("lock"));
    assert!(!locker.lock(&args("u3", "free")).await.expect("lock"));
    assert!(locker.unlock(&args("u2", "free")).await.expect("unlock"));
    let rows = server.sql("SELECT COUNT(*) FROM rt_entries WHERE name = 'free'");
    assert_eq!(rows.trim(), "0", "rows left behind: {rows}");
    // Not held, or held in the other mode: nothing released; readers
    // share, and the last one's release frees the name.
    only_holders_release_and_readers_share(&locker, args).await;
}

/// A user that may use the tables but not run the procedures (made by
/// another user, `EXECUTE` not granted): every call takes the transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_that_may_not_run_the_procedures_locks_by_the_transaction() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    // The tables and procedures, made by the test's own user.
    let maker = SqlLocker::connect(&server.url(), settings("nx_"))
        .await
        .expect("a database");
    assert!(maker.lock(&args("m", "made")).await.is_ok());
    server.sql(
        "CREATE USER 'plain'@'127.0.0.1' IDENTIFIED BY 'plainpw'; \
         GRANT SELECT, INSERT, UPDATE, DELETE ON quorum.nx_entries TO 'plain'@'127.0.0.1'; \
         GRANT SELECT, INSERT, UPDATE, DELETE ON quorum.nx_fence TO 'plain'@'127.0.0.1';",
    );
    let plain = SqlLocker::connect(
        &server.url_as("plain", "plainpw"),
        SqlConfig {
            create_tables: false,
            ..settings("nx_")
        },
    )
    .await
    .expect("the tables' privileges are enough to connect");
    if let Some(left) = plain.quarantine_left().await.expect("a database") {
        tokio::time::sleep(left + Duration::from_millis(100)).await;
    }
    assert!(plain.lock(&args("p", "n")).await.expect("lock"));
    assert!(!plain.lock(&args("q", "n")).await.expect("lock"));
    assert!(plain.unlock(&args("p", "n")).await.expect("unlock"));
    assert!(plain.lock(&args("q", "n")).await.expect("released"));
    assert!(plain.unlock(&args("q", "n")).await.expect("unlock"));
}
