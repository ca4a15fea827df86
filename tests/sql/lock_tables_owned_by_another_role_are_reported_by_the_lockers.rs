//! Reproduces a past break: a PostgreSQL role that may only create objects in the lock table's schema makes the lock tables (as schema() gives them) before any locker; the lockers take them for theirs, she owns them, and her write to them grants a held lock twice.
//!
//! docs/sql.md ("One-round-trip calls") treats "another role that may
//! create in the schema" as hostile: a function it made first is never
//! used, and a locker trusts only functions of its own user or of the
//! lock table's owner. But the setup takes whatever entries table it
//! finds (`table_exists`), whoever owns it, and makes the fence table
//! with `CREATE TABLE IF NOT EXISTS`. Mallory has `CREATE` on the schema
//! and no right to any lock table; she runs schema()'s statements before
//! the lockers start, so the tables (and, as the table's owner, the
//! functions) are hers. The lockers use them without a word, and a
//! `DELETE` of hers frees a held lock. "A user with write access to the
//! lock tables can break any lock" is documented; she had none until
//! the lockers adopted tables she made.
//!
//! Whoever owns the tables can write them, which docs/sql.md ("What it
//! does not guarantee") leaves to the operator; tables made by hand by a
//! trusted role (a DBA) are a documented way to run. So the lockers do not
//! refuse them, but no longer take them silently: each locker's setup
//! warns, naming the owner, when the tables are not its own user's.

use std::time::Duration;

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};

use crate::both::config;
use crate::log_capture::Capture;
use crate::sql_support::PgServer;

#[tokio::test(flavor = "current_thread")]
async fn lock_tables_owned_by_another_role_are_reported_by_the_lockers() {
    let Some(server) = PgServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        schema: Some("public".to_owned()),
        ..config("pt_", Duration::from_secs(60), Duration::ZERO)
    };
    server.psql(
        "CREATE ROLE app LOGIN;\n\
         CREATE ROLE mallory LOGIN;\n\
         GRANT CREATE, USAGE ON SCHEMA public TO app, mallory;",
    );
    // Before any locker: the tables and functions, as schema() gives them,
    // made by mallory; she lets the lockers' role use them.
    let statements =
        quorum_lock::sql::schema(Backend::Postgres, &settings()).expect("the statements");
    let mut script = String::from("SET ROLE mallory;\n");
    for statement in &statements {
        script.push_str(statement);
        script.push_str(";\n");
    }
    script.push_str(
        "GRANT SELECT, INSERT, UPDATE, DELETE ON public.pt_entries, public.pt_fence TO app;\n",
    );
    server.psql(&script);

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
        .await;
    let owner = server.psql(
        "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'public.pt_entries'::regclass;",
    );
    assert_eq!(owner.trim(), "mallory", "control: mallory owns the tables");
    let said = capture.containing("owned by the role mallory");
    assert!(
        held.is_err() || !said.is_empty(),
        "the lockers took for theirs the lock tables mallory (CREATE on the schema only) made \
         before them, without a word: {:#?}",
        capture.lines()
    );
    if let Ok(held) = held {
        held.unlock().await.ok();
    }
}
