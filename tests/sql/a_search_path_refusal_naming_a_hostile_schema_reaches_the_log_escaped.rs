//! Reproduces a past break: a PostgreSQL locker without a schema that finds its table in two schemas of the search path refuses the connection with an error naming the schemas raw, and the driver logs that error at ERROR level ("error returned from after_connect") with the schema name's terminal escapes as they are.
//!
//! docs/lock-servers.md, "A hostile or misconfigured server": the text a
//! database sends "is escaped before it enters an `Error` or a log"; docs/sql.md:
//! "a hostile server's text cannot drive the terminal that shows the error
//! or a log". The locker's own error escapes the refusal, but the refusal
//! is first handed back to the driver's pool from the connection hook, as a
//! `Configuration` error whose text joins the schema names the database
//! sent as they are, and the pool logs it.
//!
//! A real PostgreSQL started by `sql_support` (skipped when not installed):
//! the role's search path holds a schema named with an escape sequence and
//! a bell, then `public`, and both hold the locker's entries table.
#![cfg(feature = "postgres")]

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};

use crate::log_capture::Capture;
use crate::sql_support::PgServer;

/// `evil` with an OSC title sequence and a screen clear, as a PostgreSQL
/// identifier with Unicode escapes.
const SCHEMA: &str = r#"U&"evil\001B]0;owned\0007\001B[2J""#;

#[tokio::test]
async fn a_search_path_refusal_naming_a_hostile_schema_reaches_the_log_escaped() {
    let Some(server) = PgServer::start() else {
        return;
    };
    server.psql(&format!(
        "CREATE ROLE app LOGIN SUPERUSER; \
         CREATE SCHEMA {SCHEMA}; \
         CREATE TABLE {SCHEMA}.amb_entries (x int); \
         CREATE TABLE public.amb_entries (x int); \
         ALTER ROLE app SET search_path = {SCHEMA}, public;"
    ));
    let (capture, _guard) = Capture::install();
    let config = SqlConfig {
        table_prefix: "amb_".into(),
        call_timeout: Duration::from_secs(2),
        ..SqlConfig::default()
    };
    let result = tokio::time::timeout(
        Duration::from_secs(30),
        SqlLocker::connect(&server.url_as("app", "unused"), config),
    )
    .await
    .expect("connect ends within its timeout");
    let err = match result {
        Ok(_) => panic!("a search path with the table twice was accepted"),
        Err(err) => err,
    };
    let shown = format!("{err:?} / {err}");
    assert!(
        !shown.contains('\u{1b}'),
        "the locker's error is not escaped: {shown:?}"
    );
    let lines = capture.containing("more than one schema");
    assert!(
        !lines.is_empty(),
        "the refusal was not logged: {:?} (error: {shown})",
        capture.lines()
    );
    for line in &lines {
        assert!(
            !line.contains('\u{1b}') && !line.contains('\u{7}'),
            "the schema's name reaches the log unescaped: {line:?}"
        );
    }
}
