//! Reproduces a past break: a URL password holding tab characters, which the URL parser strips before the driver reads it, is remembered with its tabs only, so a login refusal quoting the password the driver sent shows it whole.
//!
//! docs/sql.md, "Credentials and TLS": "The URL carries user and password.
//! They are never shown", and "A password the database quotes back (in a
//! login refusal, say) is not shown either: any run of 8 or more of its
//! bytes in text the database sends is shown as `***`."
//!
//! What happens instead: the driver (sqlx 0.8) parses the URL with the
//! `url` crate, which removes every ASCII tab and newline from its input
//! (WHATWG URL parsing), so for `postgres://app:Abcdefg<TAB>Hijklmn<TAB>
//! Opqrstu@…` it sends `AbcdefgHijklmnOpqrstu`. The locker remembers the
//! password as written (`remember_url`: raw, percent-decoded, `+` as a
//! space), whose every run of 8 bytes holds a tab; none is a run of what
//! the server got, and its refusal quoting it reaches the error whole.
//!
//! The server is the fake of `tests/sql_support/fake_postgres.rs`: it
//! declines TLS, asks for a cleartext password, and refuses it quoting it.
#![cfg(feature = "postgres")]

use crate::fake_postgres::{assert_not_shown, refusal_shown, refusing_logins};

/// The password as written in the URL: a tab after every seven bytes.
const WRITTEN: &str = "Abcdefg\tHijklmn\tOpqrstu";
/// What the driver sends of it.
const SENT: &str = "AbcdefgHijklmnOpqrstu";

#[tokio::test]
async fn a_database_refusal_quoting_a_url_password_with_tabs_does_not_show_it() {
    let addr = refusing_logins();
    let url = format!("postgres://app:{WRITTEN}@{addr}/locks?sslmode=disable");
    let shown = refusal_shown(&url, addr).await;
    assert_not_shown(SENT, &shown, 8);
}
