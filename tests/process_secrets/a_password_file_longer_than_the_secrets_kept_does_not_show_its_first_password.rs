//! Reproduces a past break: a PostgreSQL password file of more than 4,096 entries pushes its own first entries out of the secrets remembered for masking, so a login refusal quoting the password the driver took from its first line shows it whole.
//!
//! docs/sql.md, "Credentials and TLS", and docs/lock-servers.md, "Threat
//! model": any run of 8 or more bytes of a password "of `PGPASSWORD`,
//! `MYSQL_PWD` or PostgreSQL's password file" in text a peer sends is shown
//! as `***`. The process keeps at most 4,096 secrets, the oldest forgotten
//! first, and `SqlLocker::new` remembers every password of the password
//! file in the file's order; the driver, like libpq, uses the first line
//! that matches. A file of a large fleet (over 4,096 lines, well under the
//! 1 MiB the locker reads) whose matching line comes first has that very
//! password forgotten before the locker's first connection; the URL itself
//! carries no password, so nothing remembered afterwards stands in for it.
//!
//! Run in a process of its own (`in_own_process`): it sets `PGPASSFILE` for
//! its whole process, and the secrets it makes the process forget are
//! process-wide. The server is the fake of
//! `tests/sql_support/fake_postgres.rs`: it declines TLS, asks for a
//! cleartext password, and refuses it quoting it.

use crate::fake_postgres::{assert_not_shown, refusal_shown, refusing_logins};

/// The password of the file's first line, the one matching the fake.
const PASSWORD: &str = "Qd8vN3kWp6Hs2Ye9";

/// Entries after it: one per database of a large fleet.
const ENTRIES: usize = 5_000;

#[test]
fn a_password_file_longer_than_the_secrets_kept_does_not_show_its_first_password() {
    crate::in_own_process(module_path!(), scene);
}

async fn scene() {
    // SAFETY: the scene runs alone in a process of its own (`in_own_process`:
    // one test thread, a current-thread runtime), and no other thread of it
    // reads or writes the environment.
    unsafe { std::env::remove_var("PGPASSWORD") };
    let addr = refusing_logins();
    let file =
        std::env::temp_dir().join(format!("quorum-lock-fleet-pgpass-{}", std::process::id()));
    let mut text = format!("127.0.0.1:{}:locks:app:{PASSWORD}\n", addr.port());
    for i in 0..ENTRIES {
        text.push_str(&format!("db{i}.example:5432:*:app:fleet-password-{i:05}\n"));
    }
    assert!(text.len() < 1 << 20, "under the 1 MiB the locker reads");
    crate::write_private(&file, text);
    // SAFETY: the scene runs alone in a process of its own (`in_own_process`:
    // one test thread, a current-thread runtime), and no other thread of it
    // reads or writes the environment.
    unsafe { std::env::set_var("PGPASSFILE", &file) };
    let url = format!("postgres://app@{addr}/locks?sslmode=disable");
    let shown = refusal_shown(&url, addr).await;
    let _ = std::fs::remove_file(&file);
    assert!(
        shown.contains(&PASSWORD[..8]) || shown.contains("***"),
        "the refusal quotes the password the driver sent: {shown}"
    );
    assert_not_shown(PASSWORD, &shown, 8);
}
