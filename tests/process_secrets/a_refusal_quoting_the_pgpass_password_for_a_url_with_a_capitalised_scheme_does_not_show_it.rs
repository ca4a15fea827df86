//! Reproduces a past break: a PostgreSQL URL whose scheme is written in capitals (`POSTGRES://`), which the locker and the driver both take, skips the locker's password-file lookup, so a login refusal quoting the password the driver took from the file shows it whole.
//!
//! docs/sql.md, "Credentials and TLS": "A password the database quotes
//! back (in a login refusal, say) is not shown either: any run of 8 or
//! more of its bytes in text the database sends is shown as `***`. For
//! PostgreSQL that covers the password the driver takes from its password
//! file when neither the URL nor `PGPASSWORD` gives one: the locker looks
//! it up as sqlx 0.8 does".
//!
//! What happens instead: `SqlLocker::new` takes the scheme without regard
//! to case (`Backend::of_url`), and so does the driver (the URL parser
//! lowercases it), but the password-file lookup runs only for a URL that
//! `starts_with("postgres")`, case and all (`src/sql/mod.rs`). With
//! `POSTGRES://` nothing of the file is remembered while the driver sends
//! its password; the fake server quotes it in its refusal.
//!
//! Run in a process of its own (`in_own_process`): it sets `PGPASSFILE` for its whole process.
//! The server is the fake of `tests/sql_support/fake_postgres.rs`.

use crate::fake_postgres::{assert_not_shown, refusal_shown, refusing_logins};

/// The password in the password file.
const PASSWORD: &str = "Uk4mS8pZc2Hv6Rd1";

#[test]
fn a_refusal_quoting_the_pgpass_password_for_a_url_with_a_capitalised_scheme_does_not_show_it() {
    crate::in_own_process(module_path!(), scene);
}

async fn scene() {
    // SAFETY: the scene runs alone in a process of its own (`in_own_process`:
    // one test thread, a current-thread runtime), and no other thread of it
    // reads or writes the environment.
    unsafe { std::env::remove_var("PGPASSWORD") };
    let addr = refusing_logins();
    let file = std::env::temp_dir().join(format!(
        "quorum-lock-pgpass-capitals-{}",
        std::process::id()
    ));
    crate::write_private(&file, format!("*:*:*:app:{PASSWORD}\n"));
    // SAFETY: the scene runs alone in a process of its own (`in_own_process`:
    // one test thread, a current-thread runtime), and no other thread of it
    // reads or writes the environment.
    unsafe { std::env::set_var("PGPASSFILE", &file) };
    let url = format!("POSTGRES://app@{addr}/locks?sslmode=disable");
    let shown = refusal_shown(&url, addr).await;
    let _ = std::fs::remove_file(&file);
    assert_not_shown(PASSWORD, &shown, 8);
}
