//! A grant function another PostgreSQL role made before any locker's
//! setup is never used: neither one with this version's body and two
//! parameters' names swapped, nor this version's own statement word for
//! word (which that role, its owner, could replace at will later).
//!
//! docs/sql.md ("One-round-trip calls"): "on PostgreSQL a locker looks for
//! the function only in the schema its table resolves to ... and uses it
//! only when its body is this version's over that table", and ("What it
//! does not guarantee") "On PostgreSQL only a function's owner may replace
//! it": a locker uses only functions of its own user or of the table's
//! owner. The signature fixes the parameters' types, not their names,
//! which the body reads the arguments by (the call passes them by
//! position).
//!
//! Every scene: mallory may create objects in the schema (every role may
//! in `public` up to PostgreSQL 14) and nothing else: no right to the lock
//! table, which the lockers' role `app` makes. She plants a grant function
//! before any locker runs; one locker holds `res` and another tries it.

use std::time::Duration;

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};

use crate::both::config;
use crate::sql_support::PgServer;

/// Reproduces a past break: a PostgreSQL role that may only create objects in the lock table's schema plants the grant function with this version's body and two parameters' names swapped (`p_name`, `p_source`); the setup compared the body alone, took it for ours, and a held lock was granted twice (the grant wrote its rows under the source).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_function_planted_with_this_versions_body_but_other_parameter_names_is_not_used() {
    scene(Planted::SwappedParameterNames).await;
}

/// Reproduces a past break: a PostgreSQL role that may only create objects in the lock table's schema makes this version's grant function, word for word, before any locker; the lockers used it (no check of its owner), and she replaced it at will later, as its owner: a held lock was granted twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_function_another_role_made_as_ours_stays_hers_to_replace() {
    scene(Planted::OursThenReplaced).await;
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Planted {
    /// This version's body, `p_name` and `p_source` named the other way
    /// round.
    SwappedParameterNames,
    /// This version's own statement; once both lockers have set up, she
    /// replaces it with the swapped one.
    OursThenReplaced,
}

async fn scene(planted_as: Planted) {
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
        .find(|s| s.contains("\"public\".\"pn_grant_v2\"("))
        .expect("the grant function's statement");
    let (first, ninth) = ("(p_name text,", "p_source text) RETURNS");
    assert!(
        ours.contains(first) && ours.contains(ninth),
        "control: the grant takes the name first and the source ninth"
    );
    // The same body and types; the two parameters' names swapped.
    let swapped = ours
        .replace(first, "(p_source text,")
        .replace(ninth, "p_name text) RETURNS");
    assert_ne!(swapped, ours);

    // The lockers' role, which makes the tables; and mallory, who may
    // create in the schema, as every role may in `public` up to 14.
    server.psql(
        "CREATE ROLE app LOGIN;\n\
         CREATE ROLE mallory LOGIN;\n\
         GRANT CREATE, USAGE ON SCHEMA public TO app, mallory;",
    );
    let first_made = match planted_as {
        Planted::SwappedParameterNames => &swapped,
        Planted::OursThenReplaced => &ours,
    };
    server.psql(&format!("SET ROLE mallory;\n{first_made};"));

    let node = |owner: &str| {
        let locker = SqlLocker::new(&server.url_as("app", "unused"), settings()).expect("a URL");
        crate::sql_shared::client_of(locker, owner)
    };
    let (holder, thief) = (node("holder"), node("thief"));
    if planted_as == Planted::OursThenReplaced {
        // Both lockers set up (tables made, functions looked for) by a
        // lock and unlock each.
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
             DROP FUNCTION public.pn_grant_v2(text, bigint, text, text, bigint, text, text, text, text);\n\
             {swapped};"
        ));
    }
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
        server.psql("SELECT pg_get_userbyid(proowner) FROM pg_proc WHERE proname = 'pn_grant_v2';");
    let rows = server.psql(
        "SELECT string_agg(name || '/' || kind, ',' ORDER BY name, kind) FROM public.pn_entries \
         WHERE kind <> 'e' AND name <> 'setup';",
    );
    assert!(
        stolen.is_err(),
        "`res` was granted to a second holder while the first holds it: the grant function \
         mallory (CREATE on the schema only) made before the lockers' setup ({planted_as:?}) \
         was used by them (the grant function's owner: {}; the table's rows, name/kind: {})",
        owner.trim(),
        rows.trim()
    );
    held.unlock().await.expect("released");
}
