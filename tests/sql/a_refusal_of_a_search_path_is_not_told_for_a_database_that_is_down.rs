//! Reproduces a past break: a PostgreSQL locker without a schema keeps the reason of its latest refused connection (the table in two schemas of the search path) and gives it for every later call that finds no connection, so once the database was down, a call said that a connection was refused and to set SqlConfig::schema instead of that the database cannot be reached.
//!
//! The application's role `app` finds `sw_entries` in two schemas of its
//! search path (`app`, made by another deployment, and `public`): its
//! locker, configured without a schema, is refused, saying to set
//! `SqlConfig::schema`. Then the server stops; a call of the same locker
//! must say the database cannot be reached, not repeat the refusal.

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{LockArgs, NetLocker};

use crate::both::config;
use crate::sql_shared::{args_from, locking_other};
use crate::Servers;

fn args(uid: &str, name: &str) -> LockArgs {
    args_from(
        "tests/sql/a_refusal_of_a_search_path_is_not_told_for_a_database_that_is_down.rs",
        uid,
        name,
    )
}

fn settings(schema: Option<&str>) -> SqlConfig {
    SqlConfig {
        schema: schema.map(str::to_owned),
        ..config("sw_", Duration::from_secs(60), Duration::from_secs(60))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_a_stopped_database_says_it_cannot_be_reached() {
    let Some(servers) = Servers::start() else {
        return;
    };
    servers.pg_server().psql("CREATE ROLE app LOGIN SUPERUSER");
    servers
        .pg_server()
        .psql("CREATE SCHEMA app AUTHORIZATION app");
    let app_url = servers.pg_server().url_as("app", "unused");
    for schema in ["public", "app"] {
        let _other = locking_other(&servers.pg, settings(Some(schema)), args).await;
    }

    // The application's locker: refused, saying what to set.
    let app = SqlLocker::new(&app_url, settings(None)).expect("a locker");
    let refused = tokio::time::timeout(Duration::from_secs(5), app.lock(&args("a", "x")))
        .await
        .expect("within the timeout")
        .expect_err("a search path with the table in two schemas is refused");
    assert!(
        refused.to_string().contains("SqlConfig::schema"),
        "a refusal names what to set: {refused}"
    );

    // The database stops.
    servers.pg_server().stop_fast();
    let down = tokio::time::timeout(Duration::from_secs(5), app.lock(&args("a", "x")))
        .await
        .expect("within the timeout")
        .expect_err("no database, no grant");
    assert!(
        !down.to_string().contains("SqlConfig::schema"),
        "a call to a database that is down repeats an earlier refusal: {down}"
    );
}
