//! Reproduces a past break: a password given as a query parameter the PostgreSQL driver reads (a percent-encoded key `pa%73sword`, or a `+` the driver reads as a space) is not remembered for masking, so a login refusal quoting it shows it whole.
//!
//! docs/sql.md, "Credentials and TLS": "A password the database quotes back
//! (in a login refusal, say) is not shown either: any run of 8 or more of
//! its bytes in text the database sends is shown as `***`." The locker
//! remembers the password as it reads the URL itself: a query key holding
//! `password` as written, and the value as written and percent-decoded.
//! The driver reads the query as a form (`url::Url::query_pairs`): the key
//! is percent-decoded too, so `pa%73sword=` is its `password` (and the
//! locker's own check of the parameters, which decodes alike, lets it
//! through), and a `+` in the value is a space, so the password sent has
//! no run of 8 bytes the locker remembered when its `+` come often enough.
//! A hostile server, or without TLS anyone answering in its place, quotes
//! the password it was sent into the error every caller logs.
//!
//! The server is a fake on a loopback port speaking just enough of the
//! PostgreSQL protocol (no database needed): it declines TLS, asks for a
//! cleartext password, and refuses it quoting it. One thread, a bounded
//! number of connections, every read bounded in time.
#![cfg(feature = "postgres")]

use crate::fake_postgres::{assert_not_shown, refusal_shown, refusing_logins};

/// The password in the URL.
const PASSWORD: &str = "Zq7pW2xK9mN4vB8c";

/// The error of a login to the fake with the URL's `query`.
async fn refusal(query: &str) -> String {
    let addr = refusing_logins();
    let url = format!("postgres://app@{addr}/locks?sslmode=disable&{query}");
    refusal_shown(&url, addr).await
}

#[tokio::test]
async fn a_password_under_a_percent_encoded_key_is_not_shown() {
    let shown = refusal(&format!("pa%73sword={PASSWORD}")).await;
    assert_not_shown(PASSWORD, &shown, 8);
}

#[tokio::test]
async fn a_password_with_plus_signs_is_not_shown_as_the_driver_sent_it() {
    // Sent as "Zq7pW2x K9mN4vB 8cT5rLq2 Yw" (each `+` a space).
    let shown = refusal("password=Zq7pW2x+K9mN4vB+8cT5rLq+2Yw").await;
    assert_not_shown("Zq7pW2x K9mN4vB 8cT5rLq 2Yw", &shown, 8);
}
