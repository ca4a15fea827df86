//! The release of one resource on PostgreSQL: one round trip, a stored
//! function made with the tables (and beside tables an older version
//! made), which hands back to the full transaction whenever a turn must
//! be passed on.

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{LockArgs, NetLocker};

use crate::both::config;
use crate::sql_shared::args_from;
use crate::sql_shared::only_holders_release_and_readers_share;
use crate::Servers;

fn args(uid: &str, name: &str) -> LockArgs {
    args_from(
        "tests/sql/one_round_trip_releases_on_postgres.rs",
        uid,
        name,
    )
}

fn settings(prefix: &str) -> SqlConfig {
    config(prefix, Duration::from_secs(60), Duration::ZERO)
}

/// The statements the server ran for the role `counted` since the log
/// held `from` bytes: each logged as `LOG:  execute …` or `LOG:
/// statement: …`, but for the settings of a newly opened connection.
fn statements_since(log: &std::path::Path, from: usize) -> Vec<String> {
    let text = std::fs::read(log).expect("the server's log");
    String::from_utf8_lossy(&text[from.min(text.len())..])
        .lines()
        .filter(|line| line.contains("LOG:  execute") || line.contains("LOG:  statement:"))
        // A connection the pool opens runs its session settings, and finds
        // and keeps its schema, once, not per call.
        .filter(|line| {
            !(line.contains("SET SESSION CHARACTERISTICS")
                || line.contains("set_config('search_path'")
                || line.contains("current_schemas(false)")
                || line.contains("current_schema()"))
        })
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_and_its_unlock_on_a_free_name_are_two_statements() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let log = {
        let pg = servers.pg_server();
        // Only this role's statements are logged: the test's own psql
        // runs as postgres.
        pg.psql(
            "CREATE ROLE counted LOGIN SUPERUSER; ALTER ROLE counted SET log_statement = 'all'",
        );
        pg.log_path()
    };
    let url = servers.pg_server().url_as("counted", "unused");
    let locker = SqlLocker::connect(&url, settings("rt_"))
        .await
        .expect("a database");
    // The set-up's statements (version, tables) come before.
    assert!(locker.lock(&args("warm", "warm-up")).await.expect("lock"));
    assert!(locker
        .unlock(&args("warm", "warm-up"))
        .await
        .expect("unlock"));

    let from = std::fs::metadata(&log).expect("the log").len() as usize;
    assert!(locker.lock(&args("u1", "free")).await.expect("lock"));
    assert!(locker.unlock(&args("u1", "free")).await.expect("unlock"));
    let ran = statements_since(&log, from);
    assert_eq!(
        ran.len(),
        2,
        "a lock and its unlock of a free name ran {} statements: {ran:#?}",
        ran.len()
    );
    // Released for good: another uid gets it at once, and the name's rows
    // are gone with its holder.
    assert!(locker.lock(&args("u2", "free")).await.expect("lock"));
    assert!(locker.unlock(&args("u2", "free")).await.expect("unlock"));
    let rows = servers
        .pg_server()
        .psql("SELECT count(*) FROM rt_entries WHERE name = 'free'");
    assert_eq!(rows.trim(), "0", "rows left behind: {rows}");
    // Not held, or held in the other mode: nothing released; readers
    // share, and the last one's release frees the name.
    only_holders_release_and_readers_share(&locker, args).await;
}

/// Tables made before the function existed (an older version of the
/// library): a locker that may create objects adds the function; one that
/// may not still locks and releases, by the transaction. A function
/// dropped under a running locker is made again by its next setup, and
/// the release that found it gone still answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_without_the_function_get_it_or_release_by_the_transaction() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let url = servers.pg.clone();
    let first = SqlLocker::connect(&url, settings("up_"))
        .await
        .expect("a database");
    assert!(first.lock(&args("a", "n")).await.expect("lock"));
    let drop_it = "DROP FUNCTION up_release_v1(text, text, text)";
    let exists = "SELECT to_regprocedure('up_release_v1(text, text, text)') IS NOT NULL";
    assert_eq!(servers.pg_server().psql(exists).trim(), "t");
    servers.pg_server().psql(drop_it);

    let without = SqlLocker::connect(
        &url,
        SqlConfig {
            create_tables: false,
            ..settings("up_")
        },
    )
    .await
    .expect("tables without the function still serve a locker that may not make it");
    assert!(without.lock(&args("w", "m")).await.expect("lock"));
    assert!(without.unlock(&args("w", "m")).await.expect("unlock"));
    assert!(without.lock(&args("w2", "m")).await.expect("released"));
    assert!(without.unlock(&args("w2", "m")).await.expect("unlock"));
    assert_eq!(servers.pg_server().psql(exists).trim(), "f");

    // Dropped under the running locker: its release still answers, and
    // the function is back after the next setup.
    assert!(first.unlock(&args("a", "n")).await.expect("unlock"));
    assert!(first.lock(&args("a", "n")).await.expect("lock"));
    assert!(first.unlock(&args("a", "n")).await.expect("unlock"));
    assert_eq!(servers.pg_server().psql(exists).trim(), "t");

    servers.pg_server().psql(drop_it);
    let upgraded = SqlLocker::connect(&url, settings("up_"))
        .await
        .expect("tables of an older version get the function");
    assert_eq!(servers.pg_server().psql(exists).trim(), "t");
    assert!(upgraded.lock(&args("b", "n")).await.expect("lock"));
    assert!(upgraded.unlock(&args("b", "n")).await.expect("unlock"));
}
