//! Reproduces a past break: a release_v1 made by a locker without a schema names its table unqualified, so a locker configured with that schema whose search path leads elsewhere had every one-resource unlock fail (the table "does not exist") and its locks stay held.
//!
//! The tables and the function are made in `public` by a locker without a
//! schema (the default search path finds no schema of the superuser's
//! name). The application's role has a schema of its own and a search
//! path of only that schema (`ALTER ROLE app SET search_path = app`, as
//! hardening guides advise), and names its lock tables by schema,
//! `public`. Its calls name `"public"."…entries"`;
//! the function it calls, `"public"."…release_v1"`, must too.

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{LockArgs, NetLocker};

use crate::both::config;
use crate::sql_shared::args_from;
use crate::Servers;

fn args(uid: &str, name: &str) -> LockArgs {
    args_from(
        "tests/sql/a_release_under_a_schema_reads_no_table_through_the_search_path.rs",
        uid,
        name,
    )
}

fn settings(schema: Option<&str>) -> SqlConfig {
    SqlConfig {
        schema: schema.map(str::to_owned),
        ..config("sp_", Duration::from_secs(60), Duration::ZERO)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_under_a_schema_reads_no_table_through_the_search_path() {
    let Some(servers) = Servers::start() else {
        return;
    };
    // Made by a locker without a schema: public.sp_entries, and
    // public.sp_release_v1.
    let maker = SqlLocker::connect(&servers.pg, settings(None))
        .await
        .expect("a database");
    assert!(maker.lock(&args("warm", "warm-up")).await.expect("lock"));
    assert!(maker
        .unlock(&args("warm", "warm-up"))
        .await
        .expect("unlock"));
    drop(maker);
    servers.pg_server().psql(
        "CREATE ROLE app LOGIN SUPERUSER; CREATE SCHEMA app AUTHORIZATION app; \
             ALTER ROLE app SET search_path = app",
    );

    let url = servers.pg_server().url_as("app", "unused");
    let app = SqlLocker::connect(&url, settings(Some("public")))
        .await
        .expect("a database");
    assert!(app.lock(&args("u1", "n")).await.expect("lock"));
    let released = app.unlock(&args("u1", "n")).await;
    let rows = servers
        .pg_server()
        .psql("SELECT uid FROM public.sp_entries WHERE name = 'n' AND kind = 'h'");
    assert!(
        matches!(released, Ok(true)),
        "the unlock of a held lock answered {released:?}; holder rows left: {rows:?}"
    );
    assert!(
        app.lock(&args("u2", "n")).await.expect("lock"),
        "released, so another uid gets it"
    );
}
