//! Reproduces a past break: a PostgreSQL server that refuses the login with a message quoting the password it was sent has the password shown whole in the `SqlLocker`'s error.
//!
//! docs/sql.md, "Credentials and TLS": "The URL carries user and password.
//! They are never shown: `endpoint()`, errors, logs and `Debug` print
//! `scheme://host:port/database`". A refusal of the credentials (SQLSTATE
//! 28P01) is reported as "the database refused the credentials
//! ({message})", the server's message escaped and nothing more: a hostile
//! server, or without TLS anyone answering in its place, that quotes the
//! password it was sent (a cleartext password exchange hands it over)
//! puts it in the error every caller logs.
//!
//! The server is the fake of `tests/sql_support/fake_postgres.rs` (no
//! database needed): it refuses each login quoting the password.
#![cfg(feature = "postgres")]

use crate::fake_postgres::{assert_not_shown, refusal_shown, refusing_logins};

/// The password in the URL.
const PASSWORD: &str = "Zq7pW2xK9mN4vB8c";

#[tokio::test]
async fn a_database_refusal_quoting_the_password_does_not_show_it() {
    let addr = refusing_logins();
    let url = format!("postgres://app:{PASSWORD}@{addr}/locks?sslmode=disable");
    let shown = refusal_shown(&url, addr).await;
    assert_not_shown(PASSWORD, &shown, 6);
}
