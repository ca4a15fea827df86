//! Reproduces a past break: a database URL with no password but an `@` in its query (`?application_name=nightly@batch`) has the text between the port and that `@` remembered as a password, so the database's honest words that share 8 bytes with it are masked: `database "nosuchdb" does not exist` is shown as `database "***" does not exist`.
//!
//! src/locker/secrets.rs remembers "the password of a Redis or database
//! URL"; docs/sql.md: "A password the database quotes back ... is not
//! shown". The URL's password is read from its user information, taken as
//! everything before the last `@` of the whole URL, query included: with no
//! user information at all, `127.0.0.1:PORT/nosuchdb?application_name=nightly`
//! is read as user `127.0.0.1` and password `PORT/nosuchdb?...`. Every run
//! of 8 bytes of that (the database's name, `applicat`, ...) is then masked
//! in what any database says to this process, hiding the name the error is
//! about.
//!
//! Run in a process of its own (`in_own_process`; what it remembers is kept for the whole
//! process). A real PostgreSQL started by `sql_support` (skipped when not
//! installed); the URL names a database that does not exist.

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};

use crate::sql_support::PgServer;

#[test]
fn a_url_without_a_password_hides_no_honest_words_of_the_database() {
    crate::in_own_process(module_path!(), scene);
}

async fn scene() {
    let Some(server) = PgServer::start() else {
        return;
    };
    let url = format!(
        "postgres://postgres@127.0.0.1:{}/nosuchdb?application_name=nightly@batch",
        server.port()
    );
    let config = SqlConfig {
        call_timeout: Duration::from_secs(3),
        ..SqlConfig::default()
    };
    let result = tokio::time::timeout(Duration::from_secs(20), SqlLocker::connect(&url, config))
        .await
        .expect("connect ends within its timeout");
    let err = match result {
        Ok(_) => panic!("a database that does not exist was accepted"),
        Err(err) => err,
    };
    let shown = err.to_string();
    assert!(
        shown.contains("does not exist"),
        "not the missing database's error: {shown}"
    );
    assert!(
        shown.contains("nosuchdb"),
        "the database's own words are masked though the URL has no password: {shown}"
    );
}
