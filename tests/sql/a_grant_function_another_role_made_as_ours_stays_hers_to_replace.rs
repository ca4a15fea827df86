//! Reproduces a past break: a PostgreSQL role that may only create objects in the lock table's schema makes this version's grant function, word for word, before any locker; the lockers use it, and she replaces it at will later, as its owner: a held lock is granted twice.
//!
//! docs/sql.md ("What it does not guarantee"): "On PostgreSQL only a
//! function's owner may replace it", given as why PostgreSQL has no
//! exception like MySQL's `ALTER ROUTINE`. But the locker does not look
//! at who owns the function it found (`routine_usable` reads whether it
//! exists, `EXECUTE`, and `prosrc`): one made by another role, with this
//! version's statement exactly, is used as it is, and that role, its
//! owner, may drop and make again whenever she likes. Mallory may
//! create objects in the schema (every role may in `public` up to
//! PostgreSQL 14) and nothing else: no right to the lock table. After
//! the lockers' setup she replaces the grant with one whose `p_name` and
//! `p_source` (both `text`) are named the other way round: the grant of
//! `res` writes its rows under the caller's source and answers granted,
//! and `res` stays free to the full transaction while the first locker
//! holds it.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use quorum_lock::{Dsync, NetLocker, Timeouts};

use crate::both::config;
use crate::sql_support::PgServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_function_another_role_made_as_ours_stays_hers_to_replace() {
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
    // Before any locker: this version's own statement, word for word.
    server.psql(&format!("SET ROLE mallory;\n{ours};"));

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
    // Both lockers set up (tables made, functions looked for) by a lock
    // and unlock each.
    for setup in [&holder, &thief] {
        setup
            .rw_mutex(["setup"])
            .expect("a name")
            .lock_timeout(Duration::from_secs(10))
            .await
            .expect("setup held")
            .unlock()
            .await
            .expect("setup released");
    }
    // Now mallory, the function's owner, replaces it (dropped first:
    // PostgreSQL renames no parameter in place).
    server.psql(&format!(
        "SET ROLE mallory;\n\
         DROP FUNCTION public.pn_grant_v1(text, bigint, text, text, bigint, text, text, text, text);\n\
         {planted};"
    ));
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
         WHERE kind <> 'e' AND name <> 'setup';",
    );
    assert!(
        stolen.is_err(),
        "`res` was granted to a second holder while the first holds it: the grant function \
         mallory (CREATE on the schema only) made before the lockers' setup, as this version \
         makes it, was used by them, and she replaced it after, as its owner (the grant \
         function's owner: {}; the table's rows, name/kind: {})",
        owner.trim(),
        rows.trim()
    );
    held.unlock().await.expect("released");
}
