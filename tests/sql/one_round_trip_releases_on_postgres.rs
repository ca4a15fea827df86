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
    let drop_it = "DROP FUNCTION up_release_v2(text, text, text)";
    let exists = "SELECT to_regprocedure('up_release_v2(text, text, text)') IS NOT NULL";
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

/// The plans that the server's `auto_explain` logged since the log held
/// `from` bytes, each as its lines (the query's text and its plan), of
/// the statements that run inside the locker's functions (those naming
/// their parameter `p_name`).
fn routine_plans_since(log: &std::path::Path, from: usize) -> Vec<String> {
    let text = std::fs::read(log).expect("the server's log");
    let text = String::from_utf8_lossy(&text[from.min(text.len())..]).into_owned();
    let mut plans = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if line.contains("LOG:  duration:") {
            plans.extend(current.take());
            current = Some(String::new());
        } else if line.starts_with(['\t', ' ']) {
            if let Some(plan) = current.as_mut() {
                plan.push_str(line);
                plan.push('\n');
            }
        } else {
            plans.extend(current.take());
        }
    }
    plans.extend(current);
    plans.retain(|plan| plan.contains("p_name"));
    plans
}

/// Reproduces a past break: statements planned while the lock table was
/// nearly empty read the whole table or a whole partial index for as long
/// as the plan stayed cached, however much the table had grown since. The
/// release read its resource with `WHERE name = p_name AND kind IN ('h',
/// 'q')`, which the partial indexes `entries_by_uid` and
/// `entries_by_deadline` (over `kind IN ('h', 'q')`) answer too: on a
/// table whose statistics were taken between bursts, PostgreSQL read every
/// holder of every name, and the dead entries churn leaves, filtered by
/// name, and on a table of a few pages it read the table itself. A release
/// then cost in proportion to the locks held and the index's bloat
/// (pgbench, 8 clients on names of their own: 0.4 to 4 ms of server CPU
/// per lock and release, growing run after run, against 0.15 ms through
/// the key). Every statement of the functions must reach its rows through
/// a condition on an index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_functions_read_a_resource_through_the_key_whatever_the_statistics() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let url = servers.pg.clone();
    let locker = SqlLocker::connect(&url, settings("ix_"))
        .await
        .expect("a database");
    assert!(locker.lock(&args("warm", "warm-up")).await.expect("lock"));
    assert!(locker
        .unlock(&args("warm", "warm-up"))
        .await
        .expect("unlock"));
    // Churn (each name locked and released once leaves dead rows behind),
    // then statistics taken while almost nothing is held, as autovacuum
    // takes them between bursts, and kept (no autovacuum to take them
    // again): the partial indexes look empty.
    for i in 0..300 {
        let call = args(&format!("churn-{i}"), &format!("churn-{i}"));
        assert!(locker.lock(&call).await.expect("a lock"));
        assert!(locker.unlock(&call).await.expect("an unlock"));
    }
    servers
        .pg_server()
        .psql("ALTER TABLE ix_entries SET (autovacuum_enabled = false); ANALYZE ix_entries");
    let log = {
        let pg = servers.pg_server();
        pg.psql(
            "CREATE ROLE explained LOGIN SUPERUSER; \
             ALTER ROLE explained SET session_preload_libraries = 'auto_explain'; \
             ALTER ROLE explained SET auto_explain.log_min_duration = 0; \
             ALTER ROLE explained SET auto_explain.log_nested_statements = on",
        );
        pg.log_path()
    };
    let from = std::fs::metadata(&log).expect("the log").len() as usize;
    let url = servers.pg_server().url_as("explained", "unused");
    let explained = SqlLocker::connect(&url, settings("ix_"))
        .await
        .expect("a database");
    // Past the plan cache's first five custom plans, to its generic one.
    for round in 0..8 {
        let call = args(&format!("u{round}"), "free");
        assert!(explained.lock(&call).await.expect("lock"));
        assert!(explained.unlock(&call).await.expect("unlock"));
    }
    drop(explained);
    let plans = routine_plans_since(&log, from);
    let releases = plans.iter().filter(|p| p.contains("p_uid")).count();
    assert!(
        releases >= 8,
        "expected the plans of the functions' statements in the log, found {}: {plans:#?}",
        plans.len()
    );
    // A partial index read with a condition on its column (a uid's rows)
    // finds what it asks for; read without one, it is read whole.
    let whole = |plan: &&String| {
        let lines: Vec<&str> = plan.lines().collect();
        lines.iter().enumerate().any(|(i, line)| {
            line.contains("Seq Scan")
                || (line.contains("entries_by_")
                    && !lines
                        .get(i + 1)
                        .is_some_and(|next| next.contains("Index Cond")))
        })
    };
    let scans: Vec<&String> = plans.iter().filter(whole).collect();
    assert!(
        scans.is_empty(),
        "{} of {} statements read a whole index or the table: {:#?}",
        scans.len(),
        plans.len(),
        scans
    );
}
