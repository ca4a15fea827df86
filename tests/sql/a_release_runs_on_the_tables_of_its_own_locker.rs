//! Reproduces a past break: a release_v1 function found by name through the search path (made by a locker with a schema-qualified config, for other tables) ran the one-round-trip release on those other tables, so an unlock of a held lock answered false and left it held.
//!
//! Two deployments share one database with the default table prefix: one
//! in `public`, configured with `schema: "public"`, and one in the role's
//! own schema (`app`, first on the default search path `"$user", public`),
//! configured without a schema, whose tables an older version made (no
//! function). The second finds a function of the right name through its
//! search path, `public`'s, whose body names `"public"."…entries"`; it
//! must release on its own tables all the same, or (since its search path
//! finds a table of its name in two schemas) refuse, saying to set the
//! schema.

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{LockArgs, NetLocker};

use crate::both::config;
use crate::sql_shared::args_from;
use crate::Servers;

fn args(uid: &str, name: &str) -> LockArgs {
    args_from(
        "tests/sql/a_release_runs_on_the_tables_of_its_own_locker.rs",
        uid,
        name,
    )
}

fn settings(schema: Option<&str>) -> SqlConfig {
    SqlConfig {
        schema: schema.map(str::to_owned),
        // What is checked is which tables a release runs on, not how fast:
        // a setup on a loaded machine took more than the 400 ms the shared
        // settings give (a CI run, two builds beside it).
        call_timeout: Duration::from_secs(10),
        ..config("mx_", Duration::from_secs(60), Duration::ZERO)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_runs_on_the_tables_of_its_own_locker() {
    let Some(servers) = Servers::start() else {
        return;
    };
    servers
        .pg_server()
        .psql("CREATE ROLE app LOGIN SUPERUSER; CREATE SCHEMA app AUTHORIZATION app");
    let app_url = servers.pg_server().url_as("app", "unused");

    // The app's tables, as an older version made them: no function.
    let older = SqlLocker::connect(&app_url, settings(None))
        .await
        .expect("a database");
    assert!(older.lock(&args("warm", "warm-up")).await.expect("lock"));
    drop(older);
    servers
        .pg_server()
        .psql("DROP FUNCTION IF EXISTS app.mx_release_v2(text, text, text)");
    assert_eq!(
        servers
            .pg_server()
            .psql("SELECT to_regclass('app.mx_entries') IS NOT NULL")
            .trim(),
        "t"
    );

    // The other deployment, in public, named by its schema.
    let public = SqlLocker::connect(&servers.pg, settings(Some("public")))
        .await
        .expect("a database");
    assert!(public.lock(&args("p", "other")).await.expect("lock"));
    assert!(public.unlock(&args("p", "other")).await.expect("unlock"));

    // The app, upgraded: refused, since its search path now finds a table
    // of its name in two schemas (saying to set the schema), or releasing
    // on its own tables.
    let app = match SqlLocker::connect(&app_url, settings(None)).await {
        Ok(app) => app,
        Err(refused) => {
            assert!(
                refused.to_string().contains("SqlConfig::schema"),
                "a refusal names what to set: {refused}"
            );
            return;
        }
    };
    assert!(app.lock(&args("u1", "n")).await.expect("lock"));
    let released = app.unlock(&args("u1", "n")).await;
    let rows = servers
        .pg_server()
        .psql("SELECT uid FROM app.mx_entries WHERE name = 'n' AND kind = 'h'");
    assert!(
        matches!(released, Ok(true)),
        "the unlock of a held lock answered {released:?}; holder rows left: {rows:?}"
    );
    assert!(
        app.lock(&args("u2", "n")).await.expect("lock"),
        "released, so another uid gets it"
    );
}
