//! Reproduces a past break: a PostgreSQL password file rewritten after the locker was made (a rotated password) gives the driver a password the locker never remembered, so a login refusal quoting it shows it whole.
//!
//! docs/sql.md, "Credentials and TLS": "A password the database quotes
//! back (in a login refusal, say) is not shown either: any run of 8 or
//! more of its bytes in text the database sends is shown as `***`. For
//! PostgreSQL that covers the password the driver takes from its password
//! file when neither the URL nor `PGPASSWORD` gives one: the locker looks
//! it up as sqlx 0.8 does".
//!
//! What happens instead: the locker looks the file up once, in
//! `SqlLocker::new` (`remember_pgpass`), while the driver (sqlx 0.8) reads
//! it again at every connection it opens (`PgConnectOptions::from_url`
//! runs `apply_pgpass` on each parse of the URL). A password file rewritten
//! in between (a rotation, a secret mounted anew) has its new password
//! sent to the server, unremembered; a server quoting it in its refusal
//! has it shown in the locker's error.
//!
//! A test binary of its own: it sets `PGPASSFILE` for its whole process.
//! The server is the fake of `tests/sql_support/fake_postgres.rs`: it
//! declines TLS, asks for a cleartext password, and refuses it quoting it.
#![cfg(feature = "postgres")]

#[path = "sql_support/fake_postgres.rs"]
mod fake_postgres;

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::NetLocker;

/// The password the file holds when the locker is made.
const OLD: &str = "Oy3kT8vRq1Wz6Lm4";
/// The password written in its place before the first connection.
const NEW: &str = "Nc7hP2xJs5Gd9Fb3";

/// Writes `password` for user `app` into `file`, readable by its owner only.
fn write_password(file: &std::path::Path, password: &str) {
    std::fs::write(file, format!("*:*:*:app:{password}\n")).expect("write the password file");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))
        .expect("make the password file private");
}

#[tokio::test]
async fn a_refusal_quoting_the_password_of_a_rewritten_password_file_does_not_show_it() {
    std::env::remove_var("PGPASSWORD");
    let addr = fake_postgres::refusing_logins();
    let file =
        std::env::temp_dir().join(format!("quorum-lock-pgpass-rotated-{}", std::process::id()));
    write_password(&file, OLD);
    std::env::set_var("PGPASSFILE", &file);
    let url = format!("postgres://app@{addr}/locks?sslmode=disable");
    let config = SqlConfig {
        call_timeout: Duration::from_secs(3),
        ..SqlConfig::default()
    };
    // Made: nothing sent yet.
    let locker = SqlLocker::new(&url, config).expect("a usable URL");
    // The password rotated before the first connection.
    write_password(&file, NEW);
    let result = tokio::time::timeout(Duration::from_secs(20), locker.locks())
        .await
        .expect("the call ends within its timeout");
    let _ = std::fs::remove_file(&file);
    let err = match result {
        Ok(_) => panic!("the fake PostgreSQL at {addr} was accepted"),
        Err(err) => err,
    };
    let shown = format!("{err:?} / {err}");
    assert!(
        shown.contains("28P01") || shown.contains("credentials"),
        "not the refusal: {shown}"
    );
    fake_postgres::assert_not_shown(NEW, &shown, 8);
}
