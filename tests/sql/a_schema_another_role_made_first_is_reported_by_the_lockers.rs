//! Reproduces a past break: a PostgreSQL role that may create schemas in the database makes the configured lock schema before the lockers and lets them create in it; the lockers make their tables there without a word, and she, as the schema's owner, drops the entries table and puts hers with a trigger in its place, which the locker's next call runs with the locker's rights.
//!
//! docs/sql.md ("What it does not guarantee") trusts the tables' owner
//! ("make the tables as the lockers' user, or by hand as a role you
//! trust") and says that a PostgreSQL locker warns, naming the role, when
//! another role owns the entries table or the fence table. Everyone else
//! must not make a locker run their code. The owner of the schema that
//! holds the tables is no table's owner, yet may drop any table in it
//! (PostgreSQL lets a schema's owner drop what it holds) and make another
//! of the same name. The setup (src/sql/store/setup.rs,
//! `postgres_routines`) checks the tables' owners once, and not the
//! schema's: a schema of the configured name that another role made first
//! is used silently, and a table put in place of the lockers' later is
//! written by every call (a new OID only starts a quarantine, which
//! writes the epoch marker into it).
//!
//! Mallory may create schemas in the database (`CREATE` on it) and nothing
//! else. Before any locker she makes the schema `locks` (the lockers'
//! `SqlConfig::schema`) and lets the lockers' user `app` use and create in
//! it. The lockers make their tables and functions there, as `app`; a
//! holder takes `res`. Then, in one transaction, she drops
//! `locks.sc_entries` and makes her own, with a statement trigger that
//! records `current_user`, and lets everyone write it. The holder's
//! client, whose locker was set up before, then takes another name.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{Dsync, NetLocker, Timeouts};

use crate::both::config;
use crate::log_capture::Capture;
use crate::sql_support::PgServer;

#[tokio::test(flavor = "current_thread")]
async fn a_schema_another_role_made_first_is_reported_by_the_lockers() {
    let Some(server) = PgServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        schema: Some("locks".to_owned()),
        ..config("sc_", Duration::from_secs(60), Duration::ZERO)
    };
    server.psql(
        "CREATE ROLE app LOGIN;\n\
         CREATE ROLE mallory LOGIN;\n\
         GRANT CREATE ON DATABASE quorum TO mallory;",
    );
    // Before any locker: the configured schema, made by mallory, open to
    // the lockers' user.
    server.psql(
        "SET ROLE mallory;\n\
         CREATE SCHEMA locks;\n\
         GRANT USAGE, CREATE ON SCHEMA locks TO app;",
    );

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
         FROM pg_class WHERE relname IN ('sc_entries', 'sc_fence');",
    );
    assert!(
        owners.contains("sc_entries:app") && owners.contains("sc_fence:app"),
        "control: the lockers made their own tables: {owners}"
    );
    // Control: mallory may not touch the lockers' rows.
    let denied = server.try_psql("SET ROLE mallory;\nDELETE FROM locks.sc_entries;");
    assert!(
        denied.is_err(),
        "control: mallory has no right to the entries table: {denied:?}"
    );
    // As the schema's owner, she swaps the entries table for hers.
    server.psql(
        "SET ROLE mallory;\n\
         BEGIN;\n\
         CREATE TABLE locks.sc_seen (who text);\n\
         GRANT INSERT ON locks.sc_seen TO PUBLIC;\n\
         CREATE FUNCTION locks.sc_touched() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN \
           INSERT INTO locks.sc_seen VALUES (current_user); RETURN NULL; END $f$;\n\
         DROP TABLE locks.sc_entries;\n\
         CREATE TABLE locks.sc_entries (name text COLLATE \"C\" NOT NULL, \
           uid text COLLATE \"C\" NOT NULL, kind text NOT NULL, mode text NOT NULL DEFAULT '', \
           deadline bigint NOT NULL DEFAULT 0, granted bigint NOT NULL DEFAULT 0, \
           ticket text NOT NULL DEFAULT '', channel text NOT NULL DEFAULT '', \
           owner text NOT NULL DEFAULT '', source text NOT NULL DEFAULT '', \
           stamp text NOT NULL DEFAULT '', value bytea, PRIMARY KEY (name, uid, kind));\n\
         CREATE TRIGGER sc_touched BEFORE INSERT OR UPDATE OR DELETE ON locks.sc_entries \
           FOR EACH STATEMENT EXECUTE FUNCTION locks.sc_touched();\n\
         GRANT SELECT, INSERT, UPDATE, DELETE ON locks.sc_entries TO PUBLIC;\n\
         COMMIT;",
    );
    // The holder's own locker, set up before the swap, takes another name.
    let _ = holder
        .rw_mutex(["other"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(2))
        .await;
    let seen =
        server.psql("SELECT coalesce(string_agg(DISTINCT who, ','), '') FROM locks.sc_seen;");
    let warned = capture.containing("mallory");
    assert!(
        !seen.contains("app") || !warned.is_empty(),
        "mallory's trigger ran as the lockers' user ({}): the schema `locks` she (CREATE on the \
         database only) made before the lockers was used without a word, and as its owner she \
         put her entries table in place of theirs",
        seen.trim()
    );
    held.unlock().await.ok();
}
