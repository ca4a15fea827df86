//! Reproduces a past break: a PostgreSQL role that may only create objects in the lock table's schema makes an operator `*(numeric, integer)` there; the lockers' clock expression (`extract(epoch ...) * 1000000`) resolves to it through the search path, a new locker reads a clock days ahead, and a held lock is granted twice.
//!
//! docs/sql.md ("One-round-trip calls") treats "another role that may
//! create in the schema" as hostile: a function it makes is never used.
//! But the lockers' statements and stored functions resolve their
//! operators through the session's search path, which a locker with no
//! schema configured pins to the lock table's schema (`SET search_path =
//! "public"`): after `pg_catalog` (searched first), that schema. The
//! clock, `(extract(epoch from clock_timestamp()) * 1000000)::bigint`,
//! multiplies a `numeric` by an `integer`, which `pg_catalog` has no
//! exact operator for (it casts to `numeric * numeric`): an operator
//! `public.*(numeric, integer)` is an exact match and wins (the pattern
//! of CVE-2018-1058). Mallory has `CREATE` on the schema and nothing
//! else: no right to the lock tables. After a holder took `res`, she
//! makes the operator, adding about eleven days; a locker set up after
//! reads every deadline as long past, and takes `res` over. The second
//! test: the tables in a schema of their own (`SqlConfig::schema`), and
//! mallory's operator in `public`, on the default search path, where
//! every role may create up to PostgreSQL 14 (supported from 13).

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};

use crate::both::config;
use crate::sql_support::PgServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_another_role_makes_in_the_lock_schema_does_not_move_the_lockers_clock() {
    let Some(server) = PgServer::start() else {
        return;
    };
    // No schema configured: the lockers pin their connections to the
    // schema where they find (or make) the table, `public`.
    let settings = || config("po_", Duration::from_secs(60), Duration::ZERO);
    server.psql(
        "CREATE ROLE app LOGIN;\n\
         CREATE ROLE mallory LOGIN;\n\
         GRANT CREATE, USAGE ON SCHEMA public TO app, mallory;",
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
    // Mallory's operator: the honest product, plus 10^12 microseconds.
    server.psql(
        "SET ROLE mallory;\n\
         CREATE FUNCTION public.po_mul(numeric, integer) RETURNS numeric LANGUAGE sql \
           IMMUTABLE AS 'SELECT $1 * CAST($2 AS numeric) + CAST(1000000000000 AS numeric)';\n\
         CREATE OPERATOR public.* (LEFTARG = numeric, RIGHTARG = integer, \
           FUNCTION = public.po_mul);",
    );
    let thief = node("thief");
    let stolen = thief
        .rw_mutex(["res"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(3))
        .await;
    let rows = server.psql(
        "SELECT string_agg(owner || ':' || kind || ':' || deadline, ',' ORDER BY granted) \
         FROM public.po_entries WHERE name = 'res';",
    );
    assert!(
        stolen.is_err(),
        "`res` was granted to a second holder while the first holds it: an operator \
         *(numeric, integer) that mallory (CREATE on the schema only) made in the lock \
         table's schema moved the new locker's clock (res's rows, owner:kind:deadline: {})",
        rows.trim()
    );
    held.unlock().await.expect("released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_any_role_makes_in_public_does_not_move_the_clock_of_lockers_in_their_own_schema(
) {
    let Some(server) = PgServer::start() else {
        return;
    };
    // The lock tables in a schema of the lockers' role alone; `public`
    // as up to PostgreSQL 14, where every role may create (and which is
    // on the default search path, after `"$user"`).
    let settings = || SqlConfig {
        schema: Some("locks".to_owned()),
        ..config("po_", Duration::from_secs(60), Duration::ZERO)
    };
    server.psql(
        "CREATE ROLE app LOGIN;\n\
         CREATE ROLE mallory LOGIN;\n\
         CREATE SCHEMA locks AUTHORIZATION app;\n\
         GRANT CREATE, USAGE ON SCHEMA public TO PUBLIC;",
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
    // Mallory's operator: the honest product, plus 10^12 microseconds.
    server.psql(
        "SET ROLE mallory;\n\
         CREATE FUNCTION public.po_mul(numeric, integer) RETURNS numeric LANGUAGE sql \
           IMMUTABLE AS 'SELECT $1 * CAST($2 AS numeric) + CAST(1000000000000 AS numeric)';\n\
         CREATE OPERATOR public.* (LEFTARG = numeric, RIGHTARG = integer, \
           FUNCTION = public.po_mul);",
    );
    let thief = node("thief");
    let stolen = thief
        .rw_mutex(["res"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(3))
        .await;
    let rows = server.psql(
        "SELECT string_agg(owner || ':' || kind || ':' || deadline, ',' ORDER BY granted) \
         FROM locks.po_entries WHERE name = 'res';",
    );
    assert!(
        stolen.is_err(),
        "`res` was granted to a second holder while the first holds it: an operator \
         *(numeric, integer) that mallory (no right to the lock schema or tables) made in `public` (where \
         every role may create up to PostgreSQL 14) moved the new locker's clock (res's rows, owner:kind:deadline: {})",
        rows.trim()
    );
    held.unlock().await.expect("released");
}
