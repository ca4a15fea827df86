//! Reproduces a past break: a PostgreSQL role that may only create in `public` makes `public.has_function_privilege(regprocedure, text)` (or `public.array_position(name[], name)`); the lockers' setup (or connection pinning) calls it in place of pg_catalog's, with the locker's rights, and it frees a held lock.
//!
//! Commit d5bfb45 names the clock's operators in `pg_catalog` and runs
//! the stored functions with `search_path = pg_catalog, pg_temp`, but the
//! lockers' own catalog queries still call functions unqualified through
//! the session's search path. `pg_catalog` is searched first, yet a
//! function in a later schema whose declared argument types match the
//! call's exactly wins over one of `pg_catalog` that needs a coercion or
//! is polymorphic (CVE-2018-1058): `routine_usable` calls
//! `has_function_privilege(p, 'EXECUTE')` with `p` a `regprocedure`
//! (pg_catalog has `(oid, text)`), and `pin_search_path` orders by
//! `array_position(current_schemas(false), n.nspname)` (pg_catalog's is
//! `(anycompatiblearray, anycompatible)`). Mallory, with `CREATE` on
//! `public` and no right to the lock tables, makes either function there;
//! it runs as the lockers' user, deletes the holder's row, and a second
//! holder is granted `res`. The third scene: the tables in a schema of
//! their own (`SqlConfig::schema`), mallory's function in `public`, on the
//! default search path (every role may create there up to PostgreSQL 14).

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{Dsync, NetLocker, Timeouts};

use crate::both::config;
use crate::sql_support::PgServer;

async fn scene(mallory_sql: &str, own_schema: bool) {
    let Some(server) = PgServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        schema: own_schema.then(|| "locks".to_owned()),
        ..config("pf_", Duration::from_secs(60), Duration::ZERO)
    };
    server.psql(
        "CREATE ROLE app LOGIN;\n\
         CREATE ROLE mallory LOGIN;\n\
         CREATE SCHEMA locks AUTHORIZATION app;\n\
         GRANT CREATE, USAGE ON SCHEMA public TO app, mallory;",
    );
    let table = if own_schema {
        "locks.pf_entries"
    } else {
        "public.pf_entries"
    };
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
        mallory_sql.replace("TABLE", table)
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
        "`res` was granted to a second holder while the first holds it: a function mallory \
         (CREATE on public only) made in `public` ran in a locker's query with the locker's \
         rights (res's rows, owner:kind:deadline: {})",
        rows.trim()
    );
    held.unlock().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_has_function_privilege_another_role_makes_in_public_does_not_run_in_the_lockers_setup() {
    scene(
        "CREATE FUNCTION public.has_function_privilege(regprocedure, text) RETURNS boolean \
           LANGUAGE plpgsql AS $f$ BEGIN \
             BEGIN DELETE FROM TABLE WHERE name = 'res'; \
             EXCEPTION WHEN insufficient_privilege THEN NULL; END; \
             RETURN pg_catalog.has_function_privilege(CAST($1 AS oid), $2); END $f$;\n\
         GRANT EXECUTE ON FUNCTION public.has_function_privilege(regprocedure, text) TO PUBLIC;",
        false,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_array_position_another_role_makes_in_public_does_not_run_when_a_locker_connects() {
    scene(
        "CREATE FUNCTION public.array_position(name[], name) RETURNS integer \
           LANGUAGE plpgsql AS $f$ BEGIN \
             BEGIN DELETE FROM TABLE WHERE name = 'res'; \
             EXCEPTION WHEN insufficient_privilege THEN NULL; END; \
             RETURN pg_catalog.array_position($1, $2); END $f$;",
        false,
    )
    .await;
}

/// The tables in a schema of the lockers' role alone (`SqlConfig::schema`):
/// `public` stays on the default search path, where every role may create
/// up to PostgreSQL 14.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_has_function_privilege_any_role_makes_in_public_does_not_run_in_the_setup_of_lockers_in_their_own_schema(
) {
    scene(
        "CREATE FUNCTION public.has_function_privilege(regprocedure, text) RETURNS boolean \
           LANGUAGE plpgsql AS $f$ BEGIN \
             BEGIN DELETE FROM TABLE WHERE name = 'res'; \
             EXCEPTION WHEN insufficient_privilege THEN NULL; END; \
             RETURN pg_catalog.has_function_privilege(CAST($1 AS oid), $2); END $f$;",
        true,
    )
    .await;
}
