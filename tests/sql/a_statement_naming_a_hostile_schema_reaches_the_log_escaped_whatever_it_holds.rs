//! A PostgreSQL locker without a schema pins each new connection's search
//! path, and the driver logs that statement (target `sqlx::query`); a
//! schema the database named (`current_schema()`, which a hostile server,
//! or a role that set up the search path, chooses) must reach the
//! application's subscriber escaped, whatever it holds: terminal escapes
//! or line breaks that would forge a log row.
//!
//! The masking dispatcher (src/sql/server_notices.rs) lets every event of
//! target `sqlx::query` pass unless it quotes a secret, taking the
//! statements to be "the locker's own SQL"; `statement_passes` splits a
//! statement at line feeds, carriage returns and tabs and checks only the
//! pieces. A real PostgreSQL started by `sql_support` (skipped when not
//! installed): the role's search path is one schema with a hostile name.
//! A subscriber of the test's own records every field as the driver handed
//! it over (a `&str` as it is, as a subscriber writing values raw would
//! print it).

#![cfg(feature = "postgres")]

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

use crate::log_capture::Capture;
use crate::sql_support::PgServer;

/// Every event as `target: field values`, string values as they came.
#[derive(Clone, Default)]
struct Raw(Arc<Mutex<Vec<String>>>);

struct Line(String);

impl Visit for Line {
    fn record_str(&mut self, _: &Field, value: &str) {
        self.0.push(' ');
        self.0.push_str(value);
    }
    fn record_debug(&mut self, _: &Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {value:?}"));
    }
}

impl Subscriber for Raw {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut line = Line(format!("{}:", event.metadata().target()));
        event.record(&mut line);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(line.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// Reproduces a past break: a PostgreSQL locker without a schema pinned each new connection with `SET search_path = "<the schema the database named>"`, and the driver's log of that statement reached the application's subscriber with the schema name's terminal escapes as they are.
#[tokio::test]
async fn a_statement_naming_a_hostile_schema_reaches_the_log_escaped() {
    // `evil` with an OSC title sequence and a screen clear, as a
    // PostgreSQL identifier with Unicode escapes.
    pinned_schema_is_logged_escaped(r#"U&"evil\001B]0;owned\0007\001B[2J""#, |line| {
        line.contains('\u{1b}') || line.contains('\u{7}')
    })
    .await;
}

/// Reproduces a past break: the statement pinning a new PostgreSQL connection's search path, naming a schema the database gave with a carriage return and a line feed, reached the application's subscriber with them raw (the masking dispatcher let a `sqlx::query` event's line breaks pass), so a hostile database forged a log row.
#[tokio::test]
async fn a_statement_naming_a_schema_with_a_line_break_reaches_the_log_escaped() {
    // `evil`, a carriage return, a line feed and a forged log row.
    pinned_schema_is_logged_escaped(
        r#"U&"evil\000D\000A2026-12-01T00:00:00Z ERROR forged""#,
        |line| line.contains("evil\r") || line.contains("\nforged") || line.contains("\n2026"),
    )
    .await;
}

/// Connects a locker whose role's search path is the one schema `schema`
/// (an SQL identifier), and checks that no logged line is `raw`.
async fn pinned_schema_is_logged_escaped(schema: &str, raw_in: impl Fn(&str) -> bool) {
    let Some(server) = PgServer::start() else {
        return;
    };
    server.psql(&format!(
        "CREATE ROLE app LOGIN SUPERUSER; \
         CREATE SCHEMA {schema}; \
         ALTER ROLE app SET search_path = {schema};"
    ));
    // The capture's install sets the process's catch-all default, so that
    // tracing asks every log statement again; the test's own subscriber
    // is the thread's default for the rest.
    drop(Capture::install());
    let raw = Raw::default();
    let _guard = tracing::subscriber::set_default(raw.clone());
    tracing::callsite::rebuild_interest_cache();
    let config = SqlConfig {
        table_prefix: "evil_".into(),
        call_timeout: Duration::from_secs(5),
        ..SqlConfig::default()
    };
    let connected = tokio::time::timeout(
        Duration::from_secs(30),
        SqlLocker::connect(&server.url_as("app", "unused"), config),
    )
    .await
    .expect("connect ends within its timeout");
    if let Ok(locker) = &connected {
        let _ = tokio::time::timeout(Duration::from_secs(10), locker.quarantine_left()).await;
    }
    let lines = raw.0.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let pinned: Vec<&String> = lines.iter().filter(|l| l.contains("search_path")).collect();
    // The pin is logged (the schema's name, now a bound value, is not in
    // its text); whatever names it, no line may carry its raw bytes.
    assert!(
        !pinned.is_empty(),
        "nothing logged pins the search path (connect: {}): {lines:#?}",
        match &connected {
            Ok(_) => "ok".to_owned(),
            Err(err) => err.to_string(),
        }
    );
    for line in &lines {
        assert!(
            !raw_in(line),
            "the schema's name reaches the log unescaped: {line:?}"
        );
    }
}
