//! Reproduces a past break: a PostgreSQL error answering the locker's `CREATE FUNCTION` reaches the debug log raw (`making {signature}: {err}`), with its terminal escapes, line breaks and the password it quotes.
//!
//! docs/lock-servers.md, "A hostile or misconfigured server": every piece
//! of text a peer sends that the library shows (a database's message among
//! them) "is escaped before it enters an `Error` or a log", and any run of
//! 8 or more bytes of a secret handed a locker is shown as `***`; docs/sql.md
//! says the same of a database's words. When the locker makes its stored
//! functions and the database refuses, the setup logs the driver's error by
//! its `Display`, which holds the database's message as it came.
//!
//! The database stands in for a hostile one with an event trigger that
//! refuses every `CREATE FUNCTION` with a message holding an escape
//! sequence, a forged log line and the password the role logged in with.
//! A real PostgreSQL started by `sql_support` (skipped when not installed).
#![cfg(feature = "postgres")]

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};

use crate::log_capture::Capture;
use crate::sql_support::PgServer;

/// The password in the locker's URL.
const PASSWORD: &str = "Mk4sWq9Ze2Rt7Lb5";

#[tokio::test]
async fn a_database_refusal_to_make_the_stored_functions_reaches_the_log_escaped() {
    let Some(server) = PgServer::start() else {
        return;
    };
    server.psql(&format!(
        "CREATE ROLE app LOGIN PASSWORD '{PASSWORD}'; \
         GRANT ALL ON DATABASE quorum TO app; \
         GRANT ALL ON SCHEMA public TO app; \
         CREATE FUNCTION hostile() RETURNS event_trigger LANGUAGE plpgsql AS $body$ \
         BEGIN IF tg_tag = 'CREATE FUNCTION' THEN \
           RAISE EXCEPTION 'refused %', E'\\x1b]0;owned\\x07\\x1b[2J\\nERROR forged line {PASSWORD}'; \
         END IF; END $body$; \
         CREATE EVENT TRIGGER hostile ON ddl_command_start EXECUTE FUNCTION hostile();"
    ));
    let (capture, _guard) = Capture::install();
    let config = SqlConfig {
        table_prefix: "hostile_".into(),
        ..SqlConfig::default()
    };
    let locker = tokio::time::timeout(
        Duration::from_secs(30),
        SqlLocker::connect(&server.url_as("app", PASSWORD), config),
    )
    .await
    .expect("connect ends within its timeout")
    .expect("the database is usable without its stored functions");
    drop(locker);
    let lines = capture.containing("refused");
    assert!(
        !lines.is_empty(),
        "the refusal of CREATE FUNCTION was not logged at all: {:?}",
        capture.lines()
    );
    for line in &lines {
        assert!(
            !line.contains('\u{1b}') && !line.contains('\n') && !line.contains('\u{7}'),
            "the database's words reach the log unescaped: {line:?}"
        );
        for piece in PASSWORD.as_bytes().windows(8) {
            let piece = std::str::from_utf8(piece).expect("ascii");
            assert!(
                !line.contains(piece),
                "the log shows the password ({piece} is a piece of it): {line:?}"
            );
        }
    }
}
