//! Reproduces a past break: a PostgreSQL locker without a schema keeps its one-round-trip grant on the table its name resolved to at setup, while its transaction resolves the unqualified name again through the search path, so once another deployment made a table of that name in a schema earlier on the path (the role's own), one locker granted one name to two writers, one in each table.
//!
//! Two deployments share one database with one table prefix, the layout
//! of `a_release_runs_on_the_tables_of_its_own_locker`: the application,
//! configured without a schema, whose role `app` has no schema of its own
//! yet, so its tables and routines are made in `public`; then a schema
//! `app` is made and another deployment, configured with `schema: "app"`,
//! makes its tables there, first on the application's default search path
//! `"$user", public`. The application's locker holds `x` for one writer
//! (a one-round-trip grant, in `public`); a second writer must be refused.

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{LockArgs, NetLocker};

use crate::both::config;
use crate::sql_shared::{args_from, locking_other};
use crate::Servers;

fn args(uid: &str, name: &str) -> LockArgs {
    args_from(
        "tests/sql/a_table_appearing_earlier_on_the_search_path_splits_no_locker.rs",
        uid,
        name,
    )
}

fn settings(schema: Option<&str>) -> SqlConfig {
    SqlConfig {
        schema: schema.map(str::to_owned),
        // A table made by a locker begins at epoch 0: no quarantine to
        // wait out, with the default quarantine all the same.
        ..config("sp_", Duration::from_secs(60), Duration::from_secs(60))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locker_never_grants_one_name_to_two_writers_when_a_table_shadows_its_own() {
    let Some(servers) = Servers::start() else {
        return;
    };
    servers.pg_server().psql("CREATE ROLE app LOGIN SUPERUSER");
    let app_url = servers.pg_server().url_as("app", "unused");

    // The application: no schema named after its role yet, so `public`.
    let app = SqlLocker::connect(&app_url, settings(None))
        .await
        .expect("a database");
    let first = tokio::time::timeout(Duration::from_secs(5), app.lock(&args("first", "x")))
        .await
        .expect("within the timeout")
        .expect("a lock");
    assert!(first, "the free name x was refused");
    assert_eq!(
        servers
            .pg_server()
            .psql("SELECT count(*) FROM public.sp_entries WHERE name = 'x' AND kind = 'h'")
            .trim(),
        "1"
    );

    // The other deployment, in the schema of the application's role.
    servers
        .pg_server()
        .psql("CREATE SCHEMA app AUTHORIZATION app");
    let _other = locking_other(&servers.pg, settings(Some("app")), args).await;

    // A second writer on x, through the application's locker.
    let second = tokio::time::timeout(Duration::from_secs(5), app.lock(&args("second", "x")))
        .await
        .expect("within the timeout");
    let rows = servers.pg_server().psql(
        "SELECT 'public', uid FROM public.sp_entries WHERE name = 'x' AND kind = 'h' \
         UNION ALL SELECT 'app', uid FROM app.sp_entries WHERE name = 'x' AND kind = 'h'",
    );
    assert!(
        !matches!(second, Ok(true)),
        "one locker granted x to two writers, one in each schema's table: {rows:?}"
    );
}
