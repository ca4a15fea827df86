//! Reproduces a past break: a PostgreSQL role that may only create in the lock schema makes the fence table first, with a trigger; the lockers make the entries table, take her fence table for theirs without a word (only the entries table's owner is checked), and drawing a fencing token runs her trigger with the locker's rights, which frees a held lock.
//!
//! docs/sql.md ("What it does not guarantee"): "The tables' owner can
//! break any lock: make the tables as the lockers' user, or by hand as a
//! role you trust. A PostgreSQL locker whose tables another role owns says
//! so in a warning that names it (a role that may create in the schema
//! could have made them before the lockers did)." The setup
//! (src/sql/store/setup.rs, the owner query of `postgres_routines`) asks
//! only for the owner of the entries table, and the statements that make
//! the tables create the fence table with `CREATE TABLE IF NOT EXISTS`,
//! so a fence table that another role made is kept and used, silently.
//! Its owner may put a trigger on it: a trigger's function runs as the
//! user whose statement fired it, here the locker's, every time a
//! fencing token is drawn (`INSERT ... ON CONFLICT ... DO UPDATE` of the
//! mark). Mallory has `CREATE` on `public` and nothing else; before any
//! locker she makes `public.ft_fence` as schema() gives it, with a
//! statement trigger that deletes the rows of `res` from the entries
//! table, and lets everyone use the table. The holder takes `res` and
//! draws its token; a second holder is granted `res`, and no locker said
//! that a lock table was another role's.

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};

use crate::both::config;
use crate::log_capture::Capture;
use crate::sql_support::PgServer;

#[tokio::test(flavor = "current_thread")]
async fn a_fence_table_another_role_made_first_is_reported_by_the_lockers() {
    let Some(server) = PgServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        schema: Some("public".to_owned()),
        ..config("ft_", Duration::from_secs(60), Duration::ZERO)
    };
    server.psql(
        "CREATE ROLE app LOGIN;\n\
         CREATE ROLE mallory LOGIN;\n\
         GRANT CREATE, USAGE ON SCHEMA public TO app, mallory;",
    );
    // Before any locker: the fence table as schema() gives it, made by
    // mallory, with her trigger; she lets everyone use it.
    server.psql(
        "SET ROLE mallory;\n\
         CREATE TABLE IF NOT EXISTS \"public\".\"ft_fence\" (id int PRIMARY KEY, token bigint NOT NULL);\n\
         CREATE FUNCTION public.ft_fence_touched() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN \
           BEGIN DELETE FROM public.ft_entries WHERE name = 'res'; \
           EXCEPTION WHEN insufficient_privilege OR undefined_table THEN NULL; END; \
           RETURN NULL; END $f$;\n\
         CREATE TRIGGER ft_fence_touched BEFORE INSERT OR UPDATE ON public.ft_fence \
           FOR EACH STATEMENT EXECUTE FUNCTION public.ft_fence_touched();\n\
         GRANT SELECT, INSERT, UPDATE ON public.ft_fence TO PUBLIC;",
    );

    let node = |owner: &str| {
        let locker = SqlLocker::new(&server.url_as("app", "unused"), settings()).expect("a URL");
        crate::sql_shared::client_of(locker, owner)
    };
    let (capture, _guard) = Capture::install();
    let holder = node("holder");
    let held = holder
        .rw_mutex(["res"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(10))
        .await
        .expect("res held by the holder");
    let owners = server.psql(
        "SELECT string_agg(relname || ':' || pg_get_userbyid(relowner), ',' ORDER BY relname) \
         FROM pg_class WHERE relname IN ('ft_entries', 'ft_fence');",
    );
    // The protected work begins with its token, as docs/sql.md shows.
    let token = tokio::time::timeout(Duration::from_secs(10), held.fencing_token())
        .await
        .expect("the token within 10 s");
    // Control: mallory herself may not touch the entries table.
    let denied = server.try_psql("SET ROLE mallory;\nDELETE FROM public.ft_entries;");
    assert!(
        denied.is_err(),
        "control: mallory has no right to the entries table: {denied:?}"
    );
    let thief = node("thief");
    let stolen = thief
        .rw_mutex(["res"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(3))
        .await;
    let warned = capture.containing("owned by the role mallory");
    assert!(
        stolen.is_err() || !warned.is_empty(),
        "`res` was granted to a second holder while the first holds it, after the first drew \
         its fencing token ({token:?}): the fence table mallory (CREATE on public only) made \
         before the lockers fired her trigger with the locker's rights, and no locker said \
         that a lock table is another role's (owners: {})",
        owners.trim()
    );
    held.unlock().await.ok();
}
