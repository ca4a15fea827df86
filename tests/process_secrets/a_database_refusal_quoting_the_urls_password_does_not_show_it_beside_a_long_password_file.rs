//! Reproduces a past break: a PostgreSQL password file of 256 lines or more (one per database an operator reaches) pushes the URL's own password out of the secrets remembered for masking, so a login refusal quoting the URL's password shows it whole.
//!
//! docs/sql.md, "Credentials and TLS", and docs/lock-servers.md, "Threat
//! model": any run of 8 or more bytes of "the password of a Redis or
//! database URL, of `PGPASSWORD`, `MYSQL_PWD` or PostgreSQL's password
//! file" in text a peer sends is shown as `***`. The process keeps at most
//! 256 secrets, the oldest forgotten first, and `SqlLocker::new` remembers
//! the URL's password first and then every password of the password file
//! (`PGPASSFILE`, else `~/.pgpass`), whether or not the driver will use
//! it: a file of 256 entries forgets the URL's password (and any token a
//! `RemoteLocker` of the process remembered before) before the locker's
//! first connection.
//!
//! Run in a process of its own (`in_own_process`): it sets `PGPASSFILE` for
//! its whole process, and the secrets it makes the process forget are
//! process-wide. The server is the fake of
//! `tests/sql_support/fake_postgres.rs`: it declines TLS, asks for a
//! cleartext password (the URL's), and refuses it quoting it.

use crate::fake_postgres::{assert_not_shown, refusal_shown, refusing_logins};

/// The password in the URL.
const PASSWORD: &str = "Ur7kQ2mZx9Lc4Vt8";

/// Entries in the password file: one per database of a large fleet.
const ENTRIES: usize = 300;

#[test]
fn a_database_refusal_quoting_the_urls_password_does_not_show_it_beside_a_long_password_file() {
    crate::in_own_process(module_path!(), scene);
}

async fn scene() {
    // SAFETY: the scene runs alone in a process of its own (`in_own_process`:
    // one test thread, a current-thread runtime), and no other thread of it
    // reads or writes the environment.
    unsafe { std::env::remove_var("PGPASSWORD") };
    let file = std::env::temp_dir().join(format!("quorum-lock-long-pgpass-{}", std::process::id()));
    let text: String = (0..ENTRIES)
        .map(|i| format!("db{i}.example:5432:*:app:fleet-password-{i:04}\n"))
        .collect();
    crate::write_private(&file, text);
    // SAFETY: the scene runs alone in a process of its own (`in_own_process`:
    // one test thread, a current-thread runtime), and no other thread of it
    // reads or writes the environment.
    unsafe { std::env::set_var("PGPASSFILE", &file) };
    let addr = refusing_logins();
    let url = format!("postgres://app:{PASSWORD}@{addr}/locks?sslmode=disable");
    let shown = refusal_shown(&url, addr).await;
    let _ = std::fs::remove_file(&file);
    assert_not_shown(PASSWORD, &shown, 8);
}
