//! Reproduces a past break: a release_v1 made from the documented hand-made statements (or by the previous version) names its table unqualified, and a locker configured with that schema calls it anyway, so the release runs on whatever table the caller's search path finds: an unlock of a held lock answered false and left it held.
//!
//! The documented way for tables made by hand: an administrator runs the
//! statements of `schema()` (here for no schema, as docs/sql.md prints
//! them) in a schema of the lock tables' own, `locks`, by setting the
//! search path first; the application names the schema in its config and
//! keeps its default search path (`"$user", public`). Another deployment
//! with the same prefix lives in `public`. The function found in `locks`
//! is the right name, but its body names `"…entries"` unqualified.

use std::time::Duration;

use quorum_lock::sql::{schema, Backend, SqlConfig, SqlLocker};
use quorum_lock::{LockArgs, NetLocker};

use crate::both::config;
use crate::sql_shared::args_from;
use crate::Servers;

fn args(uid: &str, name: &str) -> LockArgs {
    args_from(
        "tests/sql/a_hand_made_release_function_acts_on_its_own_schemas_table.rs",
        uid,
        name,
    )
}

fn settings(schema: Option<&str>) -> SqlConfig {
    SqlConfig {
        schema: schema.map(str::to_owned),
        ..config("hm_", Duration::from_secs(60), Duration::ZERO)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_made_release_function_acts_on_its_own_schemas_table() {
    let Some(servers) = Servers::start() else {
        return;
    };
    // The other deployment: public.hm_entries, made by its locker.
    let other = SqlLocker::connect(&servers.pg, settings(None))
        .await
        .expect("a database");
    assert!(other.lock(&args("o", "warm-up")).await.expect("lock"));
    assert!(other.unlock(&args("o", "warm-up")).await.expect("unlock"));
    drop(other);

    // This deployment's tables, made by hand in `locks` as documented.
    let statements = schema(Backend::Postgres, &settings(None)).expect("statements");
    let mut script = String::from("CREATE SCHEMA locks; SET search_path = locks;\n");
    for statement in &statements {
        script.push_str(statement);
        script.push_str(";\n");
    }
    servers.pg_server().psql(&script);
    assert_eq!(
        servers
            .pg_server()
            .psql("SELECT to_regprocedure('locks.hm_release_v2(text, text, text)') IS NOT NULL")
            .trim(),
        "t"
    );

    let app = SqlLocker::connect(
        &servers.pg,
        SqlConfig {
            create_tables: false,
            ..settings(Some("locks"))
        },
    )
    .await
    .expect("a database");
    assert!(app.lock(&args("u1", "n")).await.expect("lock"));
    let released = tokio::time::timeout(Duration::from_secs(5), app.unlock(&args("u1", "n")))
        .await
        .expect("the unlock answers");
    let left = servers
        .pg_server()
        .psql("SELECT uid FROM locks.hm_entries WHERE name = 'n' AND kind = 'h'");
    assert!(
        matches!(released, Ok(true)),
        "the unlock of a held lock answered {released:?}; holder rows left in locks: {left:?}"
    );
    assert!(
        app.lock(&args("u2", "n")).await.expect("lock"),
        "released, so another uid gets it"
    );
}
