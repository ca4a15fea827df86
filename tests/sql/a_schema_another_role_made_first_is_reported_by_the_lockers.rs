//! A schema that another PostgreSQL role made before the lockers, and
//! that the lockers then make their tables in, is reported by them: its
//! owner may swap their tables for hers without a word otherwise.
//!
//! docs/sql.md ("What it does not guarantee") trusts the tables' owner
//! ("make the tables as the lockers' user, or by hand as a role you
//! trust") and says that a PostgreSQL locker warns, naming the role, when
//! another role owns the entries table or the fence table. Everyone else
//! must not make a locker run their code. The owner of the schema that
//! holds the tables is no table's owner, yet may drop any table in it
//! (PostgreSQL lets a schema's owner drop what it holds) and make another
//! of the same name. The setup (src/sql/store/setup.rs,
//! `postgres_routines`) checks the tables' owners once, never the
//! schema's.
//!
//! Mallory may create schemas in the database (`CREATE` on it) and nothing
//! else. Before any locker she makes the lockers' schema (each test says
//! which) and lets the lockers' user `app` use and create in it. The
//! lockers make their tables and functions there, as `app`; a holder takes
//! `res`. Then, in one transaction, she drops the entries table and makes
//! her own, with a statement trigger that records `current_user`, and lets
//! everyone write it. The holder's client, whose locker was set up before,
//! then takes another name.

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};

use crate::both::config;
use crate::log_capture::Capture;
use crate::sql_support::PgServer;

/// The scene above, with mallory's schema `schema` and the lockers'
/// tables prefixed `prefix`; `settings` gives the lockers' settings.
/// `broke` says, in the failure message, how her schema came to hold
/// the lockers' tables.
async fn a_schema_mallory_made_first_is_reported(
    schema: &str,
    prefix: &str,
    settings: impl Fn() -> SqlConfig,
    broke: &str,
) {
    let Some(server) = PgServer::start() else {
        return;
    };
    server.psql(
        "CREATE ROLE app LOGIN;\n\
         CREATE ROLE mallory LOGIN;\n\
         GRANT CREATE ON DATABASE quorum TO mallory;",
    );
    // Before any locker: the lockers' schema, made by mallory, open to
    // the lockers' user.
    server.psql(&format!(
        "SET ROLE mallory;\n\
         CREATE SCHEMA {schema};\n\
         GRANT USAGE, CREATE ON SCHEMA {schema} TO app;"
    ));

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
    let owners = server.psql(&format!(
        "SELECT string_agg(relname || ':' || pg_get_userbyid(relowner), ',' ORDER BY relname) \
         FROM pg_class WHERE relname IN ('{prefix}entries', '{prefix}fence');"
    ));
    assert!(
        owners.contains(&format!("{prefix}entries:app"))
            && owners.contains(&format!("{prefix}fence:app")),
        "control: the lockers made their own tables: {owners}"
    );
    // Control: mallory may not touch the lockers' rows.
    let denied = server.try_psql(&format!(
        "SET ROLE mallory;\nDELETE FROM {schema}.{prefix}entries;"
    ));
    assert!(
        denied.is_err(),
        "control: mallory has no right to the entries table: {denied:?}"
    );
    // As the schema's owner, she swaps the entries table for hers.
    let (entries, seen, touched) = (
        format!("{schema}.{prefix}entries"),
        format!("{schema}.{prefix}seen"),
        format!("{prefix}touched"),
    );
    server.psql(&format!(
        "SET ROLE mallory;\n\
         BEGIN;\n\
         CREATE TABLE {seen} (who text);\n\
         GRANT INSERT ON {seen} TO PUBLIC;\n\
         CREATE FUNCTION {schema}.{touched}() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN \
           INSERT INTO {seen} VALUES (current_user); RETURN NULL; END $f$;\n\
         DROP TABLE {entries};\n\
         CREATE TABLE {entries} (name text COLLATE \"C\" NOT NULL, \
           uid text COLLATE \"C\" NOT NULL, kind text NOT NULL, mode text NOT NULL DEFAULT '', \
           deadline bigint NOT NULL DEFAULT 0, granted bigint NOT NULL DEFAULT 0, \
           ticket text NOT NULL DEFAULT '', channel text NOT NULL DEFAULT '', \
           owner text NOT NULL DEFAULT '', source text NOT NULL DEFAULT '', \
           stamp text NOT NULL DEFAULT '', value bytea, PRIMARY KEY (name, uid, kind));\n\
         CREATE TRIGGER {touched} BEFORE INSERT OR UPDATE OR DELETE ON {entries} \
           FOR EACH STATEMENT EXECUTE FUNCTION {schema}.{touched}();\n\
         GRANT SELECT, INSERT, UPDATE, DELETE ON {entries} TO PUBLIC;\n\
         COMMIT;"
    ));
    // The holder's own locker, set up before the swap, takes another name.
    let _ = holder
        .rw_mutex(["other"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(2))
        .await;
    let seen = server.psql(&format!(
        "SELECT coalesce(string_agg(DISTINCT who, ','), '') FROM {seen};"
    ));
    let warned = capture.containing("mallory");
    assert!(
        !seen.contains("app") || !warned.is_empty(),
        "mallory's trigger ran as the lockers' user ({}): the schema `{schema}` she (CREATE on \
         the database only) made before the lockers{broke} was used without a word, and as its \
         owner she put her entries table in place of theirs",
        seen.trim()
    );
    held.unlock().await.ok();
}

/// Reproduces a past break: a PostgreSQL role that may create schemas in the database makes the configured lock schema before the lockers and lets them create in it; the lockers make their tables there without a word, and she, as the schema's owner, drops the entries table and puts hers with a trigger in its place, which the locker's next call runs with the locker's rights.
///
/// Mallory's schema is `locks`, the lockers' `SqlConfig::schema`. A table
/// put in place of the lockers' later is written by every call (a new OID
/// only starts a quarantine, which writes the epoch marker into it).
#[tokio::test(flavor = "current_thread")]
async fn a_schema_another_role_made_first_is_reported_by_the_lockers() {
    a_schema_mallory_made_first_is_reported(
        "locks",
        "sc_",
        || SqlConfig {
            schema: Some("locks".to_owned()),
            ..config("sc_", Duration::from_secs(60), Duration::ZERO)
        },
        "",
    )
    .await;
}

/// Reproduces a past break: a PostgreSQL role that may create schemas in the database makes a schema named as the lockers' user, first on its default search path ("$user"), and lets that user create in it; lockers with no schema configured make their tables there without a word, and she, as the schema's owner, drops the entries table and puts hers with a trigger in its place, which the locker's next call runs with the locker's rights.
///
/// With no `SqlConfig::schema`, a locker's connections are pinned to the
/// schema of its search path that holds the table or, none yet, to
/// `current_schema()` (src/sql/store/search_path.rs, `pin_search_path`),
/// where the setup makes the tables. The default search path begins with
/// `"$user"`: a schema of the user's name, made by another role, is that
/// schema. Mallory's schema is `app`, named as the lockers' user.
#[tokio::test(flavor = "current_thread")]
async fn a_user_named_schema_another_role_made_first_is_reported_by_the_lockers() {
    a_schema_mallory_made_first_is_reported(
        "app",
        "su_",
        || config("su_", Duration::from_secs(60), Duration::ZERO),
        ", first on their user's search path,",
    )
    .await;
}
