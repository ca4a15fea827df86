//! Reproduces a past break: a password the PostgreSQL driver takes from the password file (`PGPASSFILE`, or `~/.pgpass`; the URL and the environment have none) is not remembered for masking, so a login refusal quoting it shows it whole.
//!
//! docs/sql.md, "Credentials and TLS": "A password the database quotes back
//! (in a login refusal, say) is not shown either: any run of 8 or more of
//! its bytes in text the database sends is shown as `***`." The locker
//! remembers a password written in the URL and one in `PGPASSWORD` or
//! `MYSQL_PWD`; the driver (sqlx) also takes one from the password file
//! libpq reads (`PGPASSFILE`, else `~/.pgpass`) when neither the URL nor
//! `PGPASSWORD` gives one, and sends it. A hostile server, or without TLS
//! anyone answering in its place, asks for it in cleartext and quotes it
//! into the error every caller logs.
//!
//! Run in a process of its own (`in_own_process`): it sets `PGPASSFILE` for
//! its whole process. The server is the fake of
//! `a_database_refusal_quoting_the_environments_password_does_not_show_it`:
//! it declines TLS, asks for a cleartext password, and refuses it quoting
//! it. One thread, a bounded number of connections, every read bounded in
//! time.

use crate::fake_postgres::{assert_not_shown, refusal_shown, refusing_logins};

/// The password in the password file.
const PASSWORD: &str = "Pf5nC9tRw3Jx7Ub2";

#[test]
fn a_database_refusal_quoting_the_pgpass_files_password_does_not_show_it() {
    crate::in_own_process(module_path!(), scene);
}

async fn scene() {
    // SAFETY: the scene runs alone in a process of its own (`in_own_process`:
    // one test thread, a current-thread runtime), and no other thread of it
    // reads or writes the environment.
    unsafe { std::env::remove_var("PGPASSWORD") };
    let addr = refusing_logins();
    let file = std::env::temp_dir().join(format!("quorum-lock-pgpass-{}", std::process::id()));
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
