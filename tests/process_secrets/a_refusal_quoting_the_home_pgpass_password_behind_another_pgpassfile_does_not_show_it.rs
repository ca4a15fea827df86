//! Reproduces a past break: with `PGPASSFILE` naming a file that gives no password for the connection, the driver falls back to `~/.pgpass` and sends the password it finds there, which the locker never remembers, so a login refusal quoting it shows it whole.
//!
//! docs/sql.md, "Credentials and TLS": "A password the database quotes back
//! (in a login refusal, say) is not shown either: any run of 8 or more of
//! its bytes in text the database sends is shown as `***`"; docs/cli.md,
//! "locks": masked are "the passwords of its node URLs and the database
//! password variables and file".
//!
//! What happens instead: the locker reads one password file, `PGPASSFILE`
//! if set, else `~/.pgpass` (`locker::secrets::remember_pgpass`). The
//! driver (sqlx 0.8, `options/pgpass.rs`, `load_password`) reads
//! `PGPASSFILE` and, when that gives no password (no such file, or no line
//! for this connection), `~/.pgpass` as well. A user whose `PGPASSFILE`
//! holds the lines of other servers has the password of `~/.pgpass` sent,
//! unremembered; a hostile server asking for it in cleartext quotes it
//! into the error every caller logs.
//!
//! Run in a process of its own (`in_own_process`): it sets `PGPASSFILE` and
//! `HOME` for its whole process (`HOME` a fresh directory of its own). The
//! server is the fake of
//! `a_database_refusal_quoting_the_pgpass_files_password_does_not_show_it`:
//! it declines TLS, asks for a cleartext password, and refuses it quoting
//! it. One thread, a bounded number of connections, every read bounded in
//! time.

use crate::fake_postgres::{assert_not_shown, refusal_shown, refusing_logins};

/// The password in `~/.pgpass`.
const PASSWORD: &str = "Hm4xT8qZ2wL6rN9v";

#[test]
fn a_refusal_quoting_the_home_pgpass_password_behind_another_pgpassfile_does_not_show_it() {
    crate::in_own_process(module_path!(), scene);
}

async fn scene() {
    // SAFETY: the scene runs alone in a process of its own (`in_own_process`:
    // one test thread, a current-thread runtime), and no other thread of it
    // reads or writes the environment.
    unsafe { std::env::remove_var("PGPASSWORD") };
    let addr = refusing_logins();
    // `PGPASSFILE`: the lines of another server only. `~/.pgpass`: this
    // connection's. Both readable by their owner only, as libpq requires.
    let home = std::env::temp_dir().join(format!("quorum-lock-home-{}", std::process::id()));
    std::fs::create_dir_all(&home).expect("a home directory");
    let other = home.join("other-servers.pgpass");
    let file = home.join(".pgpass");
    crate::write_private(
        &other,
        "db.elsewhere.example:5432:*:app:ElsewhereOnly1234\n",
    );
    crate::write_private(&file, format!("*:*:*:app:{PASSWORD}\n"));
    // SAFETY: the scene runs alone in a process of its own (`in_own_process`:
    // one test thread, a current-thread runtime), and no other thread of it
    // reads or writes the environment.
    unsafe { std::env::set_var("PGPASSFILE", &other) };
    // SAFETY: the scene runs alone in a process of its own (`in_own_process`:
    // one test thread, a current-thread runtime), and no other thread of it
    // reads or writes the environment.
    unsafe { std::env::set_var("HOME", &home) };
    let url = format!("postgres://app@{addr}/locks?sslmode=disable");
    let shown = refusal_shown(&url, addr).await;
    let _ = std::fs::remove_dir_all(&home);
    assert_not_shown(PASSWORD, &shown, 8);
}
