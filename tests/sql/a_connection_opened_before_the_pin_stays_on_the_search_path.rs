//! Reproduces a past break: a PostgreSQL locker without a schema pins only the connections its pool opens after its first setup succeeded (and the one that setup ran on), so a connection opened by an earlier setup that timed out while waiting (a table locked by a migration or a reset) came back to the pool unpinned, and its full transactions later resolved the table through the search path to another deployment's table in the role's own schema: one locker granted one name to two writers, one in each table.
//!
//! The layout of `a_table_appearing_earlier_on_the_search_path_splits_no_locker`:
//! the application, configured without a schema, whose role `app` has no
//! schema of its own yet, so its tables are in `public`. Its locker is
//! made with `SqlLocker::new` while a migration holds the entries table
//! locked and the server is slow to accept connections (frozen for a
//! moment): the first call's connection comes up late, its setup waits
//! for the table past the call timeout, and that connection is still
//! busy when the second call's setup opens another. The migration ends:
//! both waits end well, the second setup pins its connection, and the
//! first connection comes back to the pool as it was. Then a schema `app`
//! is made and another deployment, configured with `schema: "app"`, makes
//! its tables there, first on the application's default search path. The
//! application's locker holds `x` for one writer; a second writer must be
//! refused on every connection of its pool.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{LockArgs, NetLocker};
use sqlx::Connection;

use crate::both::config;
use crate::sql_shared::locking_other;
use crate::Servers;

fn args(uid: &str, name: &str) -> LockArgs {
    args_on(uid, &[name])
}

fn args_on(uid: &str, names: &[&str]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names
            .iter()
            .map(|name| name.to_string())
            .collect::<Vec<_>>()
            .into(),
        owner: "test".into(),
        source: "tests/sql/a_connection_opened_before_the_pin_stays_on_the_search_path.rs".into(),
        quorum: 1,
    }
}

fn settings(schema: Option<&str>) -> SqlConfig {
    SqlConfig {
        schema: schema.map(str::to_owned),
        call_timeout: Duration::from_millis(1500),
        pool_size: 4,
        // A table made by a locker begins at epoch 0: no quarantine to
        // wait out, with the default quarantine all the same.
        ..config("pn_", Duration::from_secs(60), Duration::from_secs(60))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_left_from_a_timed_out_setup_never_grants_from_another_table() {
    let Some(servers) = Servers::start() else {
        return;
    };
    servers.pg_server().psql("CREATE ROLE app LOGIN SUPERUSER");
    let app_url = servers.pg_server().url_as("app", "unused");

    // The application's tables and routines, in `public`.
    drop(
        SqlLocker::connect(&app_url, settings(None))
            .await
            .expect("a database"),
    );

    // A migration holds the entries table.
    sqlx::any::install_default_drivers();
    let mut migration = sqlx::AnyConnection::connect(&servers.pg)
        .await
        .expect("a connection of the test's own");
    sqlx::raw_sql("BEGIN; LOCK TABLE public.pn_entries IN ACCESS EXCLUSIVE MODE")
        .execute(&mut migration)
        .await
        .expect("the lock");

    // The server is slow to answer (frozen here) while the first call
    // opens its connection: that connection comes up late in the call,
    // and its setup's wait for the table outlasts the call.
    let app = Arc::new(SqlLocker::new(&app_url, settings(None)).expect("a locker"));
    servers.pg_server().pause();
    let first_call = {
        let app = app.clone();
        tokio::spawn(async move { app.lock(&args("w1", "warm-1")).await })
    };
    let second_call = {
        let app = app.clone();
        tokio::spawn(async move {
            // Late enough to leave its setup room once the migration
            // commits (CI77 saw it time out with 400 ms left, beside the
            // release builds), early enough that the first call's
            // connection is still busy.
            tokio::time::sleep(Duration::from_millis(1000)).await;
            app.lock(&args("w2", "warm-2")).await
        })
    };
    tokio::time::sleep(Duration::from_millis(1200)).await;
    servers.pg_server().resume();
    let first = tokio::time::timeout(Duration::from_secs(5), first_call)
        .await
        .expect("the first call ends")
        .expect("the task");
    assert!(
        first.is_err(),
        "the first call's setup did not wait: {first:?}"
    );
    // The second call's setup opened another connection, and waits on it
    // too; the migration ends, and both waits end well.
    tokio::time::sleep(Duration::from_millis(100)).await;
    sqlx::raw_sql("COMMIT")
        .execute(&mut migration)
        .await
        .expect("the migration commits");
    let second = tokio::time::timeout(Duration::from_secs(5), second_call)
        .await
        .expect("the second call ends")
        .expect("the task");
    assert!(matches!(second, Ok(true)), "the second call: {second:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;

    let held = tokio::time::timeout(Duration::from_secs(5), app.lock(&args("first", "x")))
        .await
        .expect("within the timeout")
        .expect("a lock");
    assert!(held, "the free name x was refused");

    // The other deployment, in the schema of the application's role.
    servers
        .pg_server()
        .psql("CREATE SCHEMA app AUTHORIZATION app");
    let _other = locking_other(&servers.pg, settings(Some("app")), args).await;

    // Second writers on x (with y: two names take the full transaction),
    // through the application's locker, each on the next connection of
    // its pool.
    for attempt in 0..4 {
        let second = tokio::time::timeout(
            Duration::from_secs(5),
            app.lock(&args_on(&format!("second-{attempt}"), &["x", "y"])),
        )
        .await
        .expect("within the timeout");
        let rows = servers.pg_server().psql(
            "SELECT 'public', uid FROM public.pn_entries WHERE name = 'x' AND kind = 'h' \
             UNION ALL SELECT 'app', uid FROM app.pn_entries WHERE name = 'x' AND kind = 'h'",
        );
        assert!(
            !matches!(second, Ok(true)),
            "one locker granted x to two writers, one in each schema's table: {rows:?}"
        );
    }
}
