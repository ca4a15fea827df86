//! Reproduces a past break: a PostgreSQL locker without a schema is pinned to the schema where its own first setup found the tables, but another process of the same application started later resolves the unqualified table name through the search path anew, so once another deployment made a table of that name in a schema earlier on the path (the role's own), the application's processes split over two tables and one name had two writers, one in each.
//!
//! The layout of `a_table_appearing_earlier_on_the_search_path_splits_no_locker`:
//! the application, configured without a schema, whose role `app` has no
//! schema of its own yet, so its tables are in `public`, where its first
//! process's locker holds `x`. Then a schema `app` is made and another
//! deployment, configured with `schema: "app"`, makes its tables there,
//! first on the application's default search path. A second process of
//! the application starts (a restart, a scale-out) with the same
//! settings; its writer on `x` must be refused while the first holds it.

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{LockArgs, NetLocker};

use crate::both::config;
use crate::sql_shared::{args_from, locking_other};
use crate::Servers;

fn args(uid: &str, name: &str) -> LockArgs {
    args_from(
        "tests/sql/a_second_process_of_one_application_finds_the_table_its_first_is_pinned_to.rs",
        uid,
        name,
    )
}

fn settings(schema: Option<&str>) -> SqlConfig {
    SqlConfig {
        schema: schema.map(str::to_owned),
        // A table made by a locker begins at epoch 0: no quarantine to
        // wait out, with the default quarantine all the same.
        ..config("sq_", Duration::from_secs(60), Duration::from_secs(60))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_of_one_application_never_grant_one_name_to_two_writers() {
    let Some(servers) = Servers::start() else {
        return;
    };
    servers.pg_server().psql("CREATE ROLE app LOGIN SUPERUSER");
    let app_url = servers.pg_server().url_as("app", "unused");

    // The application's first process: no schema named after its role
    // yet, so `public`.
    let first_process = SqlLocker::connect(&app_url, settings(None))
        .await
        .expect("a database");
    let first = tokio::time::timeout(
        Duration::from_secs(5),
        first_process.lock(&args("first", "x")),
    )
    .await
    .expect("within the timeout")
    .expect("a lock");
    assert!(first, "the free name x was refused");

    // The other deployment, in the schema of the application's role.
    servers
        .pg_server()
        .psql("CREATE SCHEMA app AUTHORIZATION app");
    let _other = locking_other(&servers.pg, settings(Some("app")), args).await;

    // The application's second process, with the same settings: refused
    // (a search path with the table in two schemas), saying what to set,
    // or never granting x from the other table. The refusal comes at once:
    // the pool tries such a connection again until the call timeout, and
    // the call used to wait all of it and then, whichever timer fired
    // first, tell either the refusal or a bare timeout (CI75 saw "did not
    // answer within 2s"). Here the call timeout is long, so a refusal
    // that waits for it fails the bound below.
    let patient = SqlConfig {
        call_timeout: Duration::from_secs(120),
        ..settings(None)
    };
    let second_process = match tokio::time::timeout(
        Duration::from_secs(60),
        SqlLocker::connect(&app_url, patient),
    )
    .await
    .expect("the refusal, long before the call timeout")
    {
        Ok(locker) => locker,
        Err(refused) => {
            assert!(
                refused.to_string().contains("SqlConfig::schema"),
                "a refusal names what to set: {refused}"
            );
            return;
        }
    };
    let second = tokio::time::timeout(
        Duration::from_secs(5),
        second_process.lock(&args("second", "x")),
    )
    .await
    .expect("within the timeout");
    let rows = servers.pg_server().psql(
        "SELECT 'public', uid FROM public.sq_entries WHERE name = 'x' AND kind = 'h' \
         UNION ALL SELECT 'app', uid FROM app.sq_entries WHERE name = 'x' AND kind = 'h'",
    );
    assert!(
        !matches!(second, Ok(true)),
        "two processes of one application granted x to two writers, one in each schema's \
         table: {rows:?}"
    );
}
