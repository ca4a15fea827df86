//! Reproduces a past break: a password in the PostgreSQL password file that holds an escaped colon (`\:`) is remembered unescaped, but the driver sends it as written, backslashes and all, so a login refusal quoting what it got shows the password whole.
//!
//! docs/sql.md, "Credentials and TLS": "A password the database quotes back
//! (in a login refusal, say) is not shown either: any run of 8 or more of
//! its bytes in text the database sends is shown as `***`"; docs/cli.md,
//! "locks": masked are "the passwords of its node URLs and the database
//! password variables and file".
//!
//! What happens instead: the locker remembers the line of the password
//! file the driver would use with its `\:` and `\\` undone
//! (`locker::secrets::remember_pgpass`, as libpq reads the file). The
//! driver (sqlx 0.8, `options/pgpass.rs`) undoes them only in the first
//! four fields: the password it sends is the rest of the line as written.
//! A hostile server that asks for the password in cleartext gets
//! `Kd7qR2\:Wn5tY8\:Hs3mB6\:Pq9zL4` and quotes it; no run of 8 bytes of
//! that text, with its backslashes, is a run of the remembered
//! `Kd7qR2:Wn5tY8:Hs3mB6:Pq9zL4`, so nothing is masked, and the error
//! every caller logs shows the password (undoing its escapes is trivial).
//!
//! Run in a process of its own (`in_own_process`): it sets `PGPASSFILE` for
//! its whole process. The server is the fake of
//! `a_database_refusal_quoting_the_pgpass_files_password_does_not_show_it`:
//! it declines TLS, asks for a cleartext password, and refuses it quoting
//! it. One thread, a bounded number of connections, every read bounded in
//! time.

use crate::fake_postgres::{assert_not_shown, refusal_shown, refusing_logins};

/// The password field of the password file, as written: three colons in
/// it, each escaped as the file's format asks.
const PASSWORD: &str = r"Kd7qR2\:Wn5tY8\:Hs3mB6\:Pq9zL4";

#[test]
fn a_refusal_quoting_a_pgpass_password_with_an_escaped_colon_does_not_show_it() {
    crate::in_own_process(module_path!(), scene);
}

async fn scene() {
    // SAFETY: the scene runs alone in a process of its own (`in_own_process`:
    // one test thread, a current-thread runtime), and no other thread of it
    // reads or writes the environment.
    unsafe { std::env::remove_var("PGPASSWORD") };
    let addr = refusing_logins();
    let file =
        std::env::temp_dir().join(format!("quorum-lock-pgpass-colon-{}", std::process::id()));
    crate::write_private(&file, format!("*:*:*:app:{PASSWORD}\n"));
    // SAFETY: the scene runs alone in a process of its own (`in_own_process`:
    // one test thread, a current-thread runtime), and no other thread of it
    // reads or writes the environment.
    unsafe { std::env::set_var("PGPASSFILE", &file) };
    let url = format!("postgres://app@{addr}/locks?sslmode=disable");
    let shown = refusal_shown(&url, addr).await;
    let _ = std::fs::remove_file(&file);
    assert_not_shown(PASSWORD, &shown, 8);
}
