//! Reproduces a past break: a PostgreSQL role that may only create in `public` makes an operator `=(oid, regclass)` (or `=(oid, regprocedure)`) there; the lockers' catalog queries (`WHERE c.oid = pg_catalog.to_regclass($1)`, `WHERE oid = p`) resolve `=` through the search path to it, it runs with the locker's rights, and a held lock is granted twice.
//!
//! docs/sql.md ("What it does not guarantee") says a PostgreSQL locker
//! "names its operators, and the catalog functions of its own queries, in
//! `pg_catalog` ... so that no operator or function a role makes in a
//! schema on the search path is used in its place". The functions are now
//! qualified, but the equality operators of the catalog queries are not:
//! `table_schema` and the table-owner query compare `pg_class.oid` (an
//! `oid`) with `pg_catalog.to_regclass($1)` (a `regclass`), and
//! `routine_usable` compares `pg_proc.oid` with `p` (a `regprocedure`).
//! `pg_catalog` has no exact `=(oid, regclass)` or `=(oid, regprocedure)`
//! (it coerces to `=(oid, oid)`), so an operator with those exact argument
//! types in any schema on the search path wins (the pattern of
//! CVE-2018-1058). Mallory, with `CREATE` on `public` and no right to the
//! lock tables, makes one; a locker set up after runs it (once per catalog
//! row scanned) as the lockers' user, it deletes the holder's row, and a
//! second holder is granted `res`.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{Dsync, NetLocker, Timeouts};

use crate::both::config;
use crate::sql_support::PgServer;

async fn scene(right_type: &str, own_schema: bool) {
    let Some(server) = PgServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        schema: own_schema.then(|| "locks".to_owned()),
        ..config("eq_", Duration::from_secs(60), Duration::ZERO)
    };
    server.psql(
        "CREATE ROLE app LOGIN;\n\
         CREATE ROLE mallory LOGIN;\n\
         CREATE SCHEMA locks AUTHORIZATION app;\n\
         GRANT CREATE, USAGE ON SCHEMA public TO app, mallory;",
    );
    let table = if own_schema {
        "locks.eq_entries"
    } else {
        "public.eq_entries"
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
        "SET ROLE mallory;\n\
         CREATE FUNCTION public.oid_eq_{right_type}(oid, {right_type}) RETURNS boolean \
           LANGUAGE plpgsql AS $f$ BEGIN \
             BEGIN DELETE FROM {table} WHERE name = 'res'; \
             EXCEPTION WHEN insufficient_privilege THEN NULL; END; \
             RETURN $1 OPERATOR(pg_catalog.=) CAST($2 AS oid); END $f$;\n\
         CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = {right_type}, \
           FUNCTION = public.oid_eq_{right_type});"
    ));
    let thief = node("thief");
    let stolen = thief
        .rw_mutex(["res"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(3))
        .await;
    let rows = server.psql(&format!(
        "SELECT coalesce(string_agg(owner || ':' || kind, ',' ORDER BY granted), 'none') \
         FROM {table} WHERE name = 'res';"
    ));
    assert!(
        stolen.is_err(),
        "`res` was granted to a second holder while the first holds it: an operator \
         =(oid, {right_type}) mallory (CREATE on public only) made in `public` ran in a \
         locker's catalog query with the locker's rights (res's rows, owner:kind: {})",
        rows.trim()
    );
    held.unlock().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oid_regclass_equality_another_role_makes_in_public_does_not_run_in_the_lockers_setup() {
    scene("regclass", false).await;
}

/// The tables in a schema of the lockers' role alone (`SqlConfig::schema`):
/// `public` stays on the default search path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oid_regprocedure_equality_another_role_makes_in_public_does_not_run_in_the_setup_of_lockers_in_their_own_schema(
) {
    scene("regprocedure", true).await;
}
