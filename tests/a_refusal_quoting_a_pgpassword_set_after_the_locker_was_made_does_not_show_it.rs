//! Reproduces a past break: `PGPASSWORD` set after a PostgreSQL locker was made is sent by the driver at its next connection but was never remembered, so a login refusal quoting it shows it whole.
//!
//! docs/sql.md, "Credentials and TLS": "A password the database quotes
//! back (in a login refusal, say) is not shown either: any run of 8 or
//! more of its bytes in text the database sends is shown as `***`", and
//! `mask_secrets` (src/locker/secrets.rs) lists `PGPASSWORD` among the
//! secrets the process hands its lockers.
//!
//! What happens instead: `SqlLocker::new` remembers `PGPASSWORD` once,
//! when the locker is made, while the driver (sqlx 0.8) reads the variable
//! again at every connection it opens (`PgConnectOptions::from_url` starts
//! from `new_without_pgpass`, which reads the environment). A password put
//! in the environment between the two (a secret injected once the process
//! runs, a refreshed credential) reaches the server unremembered, and its
//! refusal quoting it reaches the locker's error whole. The same holds for
//! the password file (see
//! `a_refusal_quoting_the_password_of_a_rewritten_password_file_does_not_show_it`).
//!
//! A test binary of its own: it sets `PGPASSWORD` for its whole process.
//! The server is the fake of `tests/sql_support/fake_postgres.rs`: it
//! declines TLS, asks for a cleartext password, and refuses it quoting it.
#![cfg(feature = "postgres")]

#[path = "sql_support/fake_postgres.rs"]
mod fake_postgres;

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::NetLocker;

/// The password put in the environment after the locker was made.
const PASSWORD: &str = "Ev5rK9wQm2Tz7Hc4";

#[tokio::test]
async fn a_refusal_quoting_a_pgpassword_set_after_the_locker_was_made_does_not_show_it() {
    std::env::remove_var("PGPASSWORD");
    // No password file either.
    std::env::set_var("PGPASSFILE", "/nonexistent/quorum-lock-pgpass");
    let addr = fake_postgres::refusing_logins();
    let url = format!("postgres://app@{addr}/locks?sslmode=disable");
    let config = SqlConfig {
        call_timeout: Duration::from_secs(3),
        ..SqlConfig::default()
    };
    // Made: nothing sent yet.
    let locker = SqlLocker::new(&url, config).expect("a usable URL");
    std::env::set_var("PGPASSWORD", PASSWORD);
    let result = tokio::time::timeout(Duration::from_secs(20), locker.locks())
        .await
        .expect("the call ends within its timeout");
    let err = match result {
        Ok(_) => panic!("the fake PostgreSQL at {addr} was accepted"),
        Err(err) => err,
    };
    let shown = format!("{err:?} / {err}");
    assert!(
        shown.contains("28P01") || shown.contains("credentials"),
        "not the refusal: {shown}"
    );
    fake_postgres::assert_not_shown(PASSWORD, &shown, 8);
}
