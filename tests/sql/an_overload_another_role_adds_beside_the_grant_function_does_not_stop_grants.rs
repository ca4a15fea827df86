//! Reproduces a past break: a PostgreSQL role that may only create objects in the lock table's schema adds an overload of the grant function with one more, defaulted parameter; every call of the lockers' grant then fails as "not unique" (42725), which is not taken for an unusable routine, and no free name can be locked.
//!
//! docs/sql.md ("One-round-trip calls") treats "another role that may
//! create in the schema" as hostile, and says a locker without a routine
//! it may use takes the full transaction, "slower, and as safe". The setup
//! checks the function of the exact signature; the call names the
//! function without its argument types (`SELECT "public"."pv_grant_v1"($1,
//! ..., $9)`), and an overload in the same schema that takes a tenth
//! parameter with a default makes that call ambiguous. The error is
//! neither a missing function nor a missing privilege, so the locker
//! neither falls back to the transaction nor looks again: each lock of a
//! free name fails, for as long as mallory's function stays. (A
//! connection that prepared the call before keeps the function it
//! resolved then; a process started after has none such.)

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{Dsync, NetLocker};

use crate::both::config;
use crate::sql_support::PgServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overload_another_role_adds_beside_the_grant_function_does_not_stop_grants() {
    let Some(server) = PgServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        schema: Some("public".to_owned()),
        ..config("pv_", Duration::from_secs(60), Duration::ZERO)
    };
    server.psql(
        "CREATE ROLE app LOGIN;\n\
         CREATE ROLE mallory LOGIN;\n\
         GRANT CREATE, USAGE ON SCHEMA public TO app, mallory;",
    );
    let node = || {
        let locker = SqlLocker::new(&server.url_as("app", "unused"), settings()).expect("a URL");
        Dsync::builder(vec![Arc::new(locker) as Arc<dyn NetLocker>])
            .owner("app")
            .build()
            .expect("a client")
    };
    // The setup: tables and functions made by the lockers' role.
    node()
        .rw_mutex(["setup"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(10))
        .await
        .expect("setup held")
        .unlock()
        .await
        .expect("setup released");
    server.psql(
        "SET ROLE mallory;\n\
         CREATE FUNCTION public.pv_grant_v2(text, bigint, text, text, bigint, text, text, \
           text, text, text DEFAULT '') RETURNS integer LANGUAGE sql AS 'SELECT 0';",
    );
    // A process of the application started after (its connections new:
    // none has the call prepared from before the overload).
    let client = node();
    let mut failures = Vec::new();
    for name in ["a", "b", "c"] {
        match client
            .rw_mutex([name])
            .expect("a name")
            .lock_timeout(Duration::from_secs(3))
            .await
        {
            Ok(held) => {
                held.unlock().await.ok();
            }
            Err(err) => failures.push(format!("{name}: {err}")),
        }
    }
    assert!(
        failures.is_empty(),
        "free names could not be locked once mallory (CREATE on the schema only) added an \
         overload of the grant function: {failures:?}"
    );
}
