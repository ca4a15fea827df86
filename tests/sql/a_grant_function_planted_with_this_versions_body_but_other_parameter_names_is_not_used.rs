//! Reproduces a past break: a PostgreSQL role that may only create objects in the lock table's schema plants the grant function with this version's body and two parameters' names swapped; the setup compares the body alone, takes it for ours, and a held lock is granted twice.
//!
//! docs/sql.md ("One-round-trip calls"): "on PostgreSQL a locker looks
//! for the function only in the schema its table resolves to ... and uses
//! it only when its body is this version's over that table", and ("What
//! it does not guarantee") "On PostgreSQL only a function's owner may
//! replace it". The check (`routine_usable`) reads `prosrc` alone; the
//! signature fixes the parameters' types, not their names, which the body
//! reads the arguments by (the call passes them by position). Mallory
//! may create objects in the schema (every role may in `public` up to
//! PostgreSQL 14) and nothing else: no right to the lock table, which
//! does not exist yet. Before any locker's setup she makes the grant with
//! this version's body over that schema's table, `p_name` and `p_source`
//! (both `text`) named the other way round. The locker finds a function
//! whose body is its own, does not replace it, and calls it: the grant of
//! `res` writes its rows under the caller's source, answers granted, and
//! `res` stays free to the full transaction while the first locker holds
//! it.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use quorum_lock::{Dsync, NetLocker, Timeouts};

use crate::both::config;
use crate::sql_support::PgServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_function_planted_with_this_versions_body_but_other_parameter_names_is_not_used() {
    let Some(server) = PgServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        schema: Some("public".to_owned()),
        ..config("pn_", Duration::from_secs(60), Duration::ZERO)
    };
    // This version's grant function over public's table, as schema() gives
    // it with that schema set.
    let ours = quorum_lock::sql::schema(Backend::Postgres, &settings())
        .expect("the statements")
        .into_iter()
        .find(|s| s.contains("\"public\".\"pn_grant_v1\"("))
        .expect("the grant function's statement");
    let (first, ninth) = ("(p_name text,", "p_source text) RETURNS");
    assert!(
        ours.contains(first) && ours.contains(ninth),
        "control: the grant takes the name first and the source ninth"
    );
    // The same body and types; the two parameters' names swapped.
    let planted = ours
        .replace(first, "(p_source text,")
        .replace(ninth, "p_name text) RETURNS");
    assert_ne!(planted, ours);

    // The lockers' role, which makes the tables; and mallory, who may
    // create in the schema, as every role may in `public` up to 14.
    server.psql(
        "CREATE ROLE app LOGIN;\n\
         CREATE ROLE mallory LOGIN;\n\
         GRANT CREATE, USAGE ON SCHEMA public TO app, mallory;",
    );
    server.psql(&format!("SET ROLE mallory;\n{planted};"));

    let node = |owner: &str| {
        let locker = SqlLocker::new(&server.url_as("app", "unused"), settings()).expect("a URL");
        Dsync::builder(vec![Arc::new(locker) as Arc<dyn NetLocker>])
            .owner(owner)
            .timeouts(Timeouts {
                wait_recheck: Duration::from_secs(20),
                ..Timeouts::default()
            })
            .build()
            .expect("a client")
    };
    let (holder, thief) = (node("holder"), node("thief"));
    let held = holder
        .rw_mutex(["res"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(10))
        .await
        .expect("res held by the holder");
    let stolen = thief
        .rw_mutex(["res"])
        .expect("a name")
        .lock_timeout(Duration::from_millis(800))
        .await;
    let owner =
        server.psql("SELECT pg_get_userbyid(proowner) FROM pg_proc WHERE proname = 'pn_grant_v1';");
    let rows = server.psql(
        "SELECT string_agg(name || '/' || kind, ',' ORDER BY name, kind) FROM public.pn_entries \
         WHERE kind <> 'e';",
    );
    assert!(
        stolen.is_err(),
        "`res` was granted to a second holder while the first holds it: the grant function \
         mallory (CREATE on the schema only) made before the lockers' setup differs from this \
         version's only in the names of two of its parameters, which the lockers' check does \
         not compare (the grant function's owner: {}; the table's rows, name/kind: {})",
        owner.trim(),
        rows.trim()
    );
    held.unlock().await.expect("released");
}
