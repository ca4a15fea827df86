//! A function or an operator another PostgreSQL role makes in `public`
//! never runs in the lockers' own queries (their setup, their catalog
//! queries, the pinning of a connection's search path), whether the lock
//! tables are in `public` or in a schema of their own with `public` still
//! on the default search path (every role may create there up to
//! PostgreSQL 14).
//!
//! docs/sql.md ("What it does not guarantee"): a PostgreSQL locker "names
//! its operators ... and the catalog functions of its own queries in
//! `pg_catalog` ... so that no operator or function a role makes in a
//! schema on the search path is used in its place". `pg_catalog` is
//! searched first, yet a function or operator in a later schema whose
//! declared argument types match a call's exactly wins over one of
//! `pg_catalog` that needs a coercion or is polymorphic (the pattern of
//! CVE-2018-1058).
//!
//! Every scene: mallory, with `CREATE` on `public` and no right to the
//! lock tables (checked), makes her object while one locker holds `res`;
//! it deletes the holder's row when it runs with the locker's rights. A
//! second locker, set up after, tries `res`.

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};

use crate::both::config;
use crate::sql_support::PgServer;

/// A function of `public` that deletes the holder's row when it can, then
/// does what pg_catalog's `call` does.
fn deleting_function(signature: &str, returns: &str, call: &str) -> String {
    format!(
        "CREATE FUNCTION public.{signature} RETURNS {returns} \
           LANGUAGE plpgsql AS $f$ BEGIN \
             BEGIN DELETE FROM TABLE WHERE name = 'res'; \
             EXCEPTION WHEN insufficient_privilege THEN NULL; END; \
             RETURN {call}; END $f$;"
    )
}

/// `=(oid, right_type)` in `public`, deleting the holder's row.
fn deleting_equality(right_type: &str) -> String {
    deleting_function(
        &format!("oid_eq_{right_type}(oid, {right_type})"),
        "boolean",
        "$1 OPERATOR(pg_catalog.=) CAST($2 AS oid)",
    ) + &format!(
        "\nCREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = {right_type}, \
           FUNCTION = public.oid_eq_{right_type});"
    )
}

fn has_function_privilege() -> String {
    deleting_function(
        "has_function_privilege(regprocedure, text)",
        "boolean",
        "pg_catalog.has_function_privilege(CAST($1 AS oid), $2)",
    )
}

/// Reproduces a past break: a PostgreSQL role that may only create in `public` makes `public.has_function_privilege(regprocedure, text)` (or `public.array_position(name[], name)`); the lockers' setup (or connection pinning) calls it in place of pg_catalog's, with the locker's rights, and it frees a held lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_has_function_privilege_another_role_makes_in_public_does_not_run_in_the_lockers_setup() {
    let sql = has_function_privilege()
        + "\nGRANT EXECUTE ON FUNCTION public.has_function_privilege(regprocedure, text) TO PUBLIC;";
    scene("pf_", &sql, false).await;
}

/// Reproduces a past break: `public.array_position(name[], name)`, made by a role that may only create in `public`, ran in place of pg_catalog's when a locker pinned its connection's search path, with the locker's rights, and freed a held lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_array_position_another_role_makes_in_public_does_not_run_when_a_locker_connects() {
    let sql = deleting_function(
        "array_position(name[], name)",
        "integer",
        "pg_catalog.array_position($1, $2)",
    );
    scene("pf_", &sql, false).await;
}

/// Reproduces a past break: the same `has_function_privilege` with the tables in a schema of the lockers' role alone (`SqlConfig::schema`), `public` still on the default search path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_has_function_privilege_any_role_makes_in_public_does_not_run_in_the_setup_of_lockers_in_their_own_schema(
) {
    scene("pf_", &has_function_privilege(), true).await;
}

/// Reproduces a past break: a PostgreSQL role that may only create in `public` makes an operator `=(oid, regclass)` (or `=(oid, regprocedure)`) there; the lockers' catalog queries (`WHERE c.oid = pg_catalog.to_regclass($1)`, `WHERE oid = p`) resolve `=` through the search path to it, it runs with the locker's rights, and a held lock is granted twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oid_regclass_equality_another_role_makes_in_public_does_not_run_in_the_lockers_setup() {
    scene("eq_", &deleting_equality("regclass"), false).await;
}

/// Reproduces a past break: the same with `=(oid, regprocedure)` (the lockers' check of their stored functions, `WHERE oid = p`), the tables in a schema of the lockers' role alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oid_regprocedure_equality_another_role_makes_in_public_does_not_run_in_the_setup_of_lockers_in_their_own_schema(
) {
    scene("eq_", &deleting_equality("regprocedure"), true).await;
}

/// Mallory runs `mallory_sql` (`TABLE` standing for the entries table)
/// while a locker over tables of `prefix` holds `res`, in `public` or in
/// the lockers' own schema `locks`; a second locker must not get `res`.
async fn scene(prefix: &str, mallory_sql: &str, own_schema: bool) {
    let Some(server) = PgServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        schema: own_schema.then(|| "locks".to_owned()),
        ..config(prefix, Duration::from_secs(60), Duration::ZERO)
    };
    server.psql(
        "CREATE ROLE app LOGIN;\n\
         CREATE ROLE mallory LOGIN;\n\
         CREATE SCHEMA locks AUTHORIZATION app;\n\
         GRANT CREATE, USAGE ON SCHEMA public TO app, mallory;",
    );
    let table = format!(
        "{}.{prefix}entries",
        if own_schema { "locks" } else { "public" }
    );
    let node = |owner: &str| {
        let locker = SqlLocker::new(&server.url_as("app", "unused"), settings()).expect("a URL");
        crate::sql_shared::client_of(locker, owner)
    };
    let holder = node("holder");
    let held = holder
        .rw_mutex(["res"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(10))
        .await
        .expect("res held by the holder");
    // Control: mallory herself may not touch the lock tables.
    let denied = server.try_psql(&format!(
        "SET ROLE mallory;\nDELETE FROM {table} WHERE name = 'res';"
    ));
    assert!(
        denied.is_err(),
        "control: mallory has no right to the tables: {denied:?}"
    );
    server.psql(&format!(
        "SET ROLE mallory;\n{}",
        mallory_sql.replace("TABLE", &table)
    ));
    let thief = node("thief");
    let stolen = thief
        .rw_mutex(["res"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(3))
        .await;
    let rows = server.psql(&format!(
        "SELECT string_agg(owner || ':' || kind || ':' || deadline, ',' ORDER BY granted) \
         FROM {table} WHERE name = 'res';"
    ));
    assert!(
        stolen.is_err(),
        "`res` was granted to a second holder while the first holds it: what mallory \
         (CREATE on public only) made in `public` ran in a locker's query with the locker's \
         rights ({mallory_sql:?}; res's rows, owner:kind:deadline: {})",
        rows.trim()
    );
    held.unlock().await.ok();
}
