//! Reproduces a past break: a PostgreSQL password file with a byte that is not UTF-8 on a line after the one the driver uses (a Latin-1 comment, say) is passed over whole by the locker, while the driver still sends the password of the earlier line, so a login refusal quoting it shows it whole.
//!
//! docs/sql.md, "Credentials and TLS": "A password the database quotes back
//! (in a login refusal, say) is not shown either: any run of 8 or more of
//! its bytes in text the database sends is shown as `***`"; docs/cli.md,
//! "locks": masked are "the passwords of its node URLs and the database
//! password variables and file".
//!
//! What happens instead: the locker reads the password file whole as
//! UTF-8 (`locker::secrets::remember_pgpass`, `read_to_string`) and
//! remembers nothing when that fails. The driver (sqlx 0.8,
//! `options/pgpass.rs`) reads it line by line and stops at the first line
//! it cannot read, after the lines before it: a comment `# f\xfcr prod`
//! (ISO-8859-1) below the matching line leaves the driver's password
//! as it was, and the locker's memory empty. A hostile server asking for
//! the password in cleartext quotes it into the error every caller logs.
//!
//! Run in a process of its own (`in_own_process`): it sets `PGPASSFILE` for
//! its whole process. The server is the fake of
//! `a_database_refusal_quoting_the_pgpass_files_password_does_not_show_it`:
//! it declines TLS, asks for a cleartext password, and refuses it quoting
//! it. One thread, a bounded number of connections, every read bounded in
//! time.

use crate::fake_postgres::{assert_not_shown, refusal_shown, refusing_logins};

/// The password in the password file.
const PASSWORD: &str = "Vb6kP3sW9nQ2xJ7e";

#[test]
fn a_refusal_quoting_a_pgpass_password_above_a_latin1_comment_does_not_show_it() {
    crate::in_own_process(module_path!(), scene);
}

async fn scene() {
    // SAFETY: the scene runs alone in a process of its own (`in_own_process`:
    // one test thread, a current-thread runtime), and no other thread of it
    // reads or writes the environment.
    unsafe { std::env::remove_var("PGPASSWORD") };
    let addr = refusing_logins();
    let file =
        std::env::temp_dir().join(format!("quorum-lock-pgpass-latin1-{}", std::process::id()));
    // This connection's line, then a comment in ISO-8859-1 (`für`).
    let mut text = format!("*:*:*:app:{PASSWORD}\n").into_bytes();
    text.extend_from_slice(b"# f\xfcr prod\n");
    crate::write_private(&file, text);
    // SAFETY: the scene runs alone in a process of its own (`in_own_process`:
    // one test thread, a current-thread runtime), and no other thread of it
    // reads or writes the environment.
    unsafe { std::env::set_var("PGPASSFILE", &file) };
    let url = format!("postgres://app@{addr}/locks?sslmode=disable");
    let shown = refusal_shown(&url, addr).await;
    let _ = std::fs::remove_file(&file);
    assert_not_shown(PASSWORD, &shown, 8);
}
