//! Reproduces a past break: a password the PostgreSQL driver takes from `PGPASSWORD` (the URL has none) is not remembered for masking, so a login refusal quoting it shows it whole.
//!
//! docs/sql.md, "Credentials and TLS": "A password the database quotes back
//! (in a login refusal, say) is not shown either: any run of 8 or more of
//! its bytes in text the database sends is shown as `***`." The locker
//! remembers only a password written in the URL; the driver (sqlx) takes
//! one from the environment's `PGPASSWORD` when the URL has none, as libpq
//! does, and sends it. A hostile server, or without TLS anyone answering
//! in its place, quotes it into the error every caller logs.
//!
//! Run in a process of its own (`in_own_process`): it sets `PGPASSWORD` for
//! its whole process. The server is a fake on a loopback port speaking just
//! enough of the PostgreSQL protocol (no database needed): it declines TLS,
//! asks for a cleartext password, and refuses it quoting it. One thread, a
//! bounded number of connections, every read bounded in time.

use crate::fake_postgres::{assert_not_shown, refusal_shown, refusing_logins};

/// The password in the environment.
const PASSWORD: &str = "Zq7pW2xK9mN4vB8c";

#[test]
fn a_database_refusal_quoting_the_environments_password_does_not_show_it() {
    crate::in_own_process(module_path!(), scene);
}

async fn scene() {
    // SAFETY: the scene runs alone in a process of its own (`in_own_process`:
    // one test thread, a current-thread runtime), and no other thread of it
    // reads or writes the environment.
    unsafe { std::env::set_var("PGPASSWORD", PASSWORD) };
    let addr = refusing_logins();
    let url = format!("postgres://app@{addr}/locks?sslmode=disable");
    let shown = refusal_shown(&url, addr).await;
    assert_not_shown(PASSWORD, &shown, 8);
}
