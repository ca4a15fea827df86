//! Reproduces a past break: the rest of a malformed line of PostgreSQL's password file, which the locker remembers because the driver logs the line whole at WARN, is logged by the driver unmasked when the locker is made (`SqlLocker::new`, within `SqlLocker::connect`), outside any masked poll.
//!
//! docs/sql.md, "Credentials and TLS": "The rest of a malformed line,
//! which the driver logs whole at WARN, is remembered as well", and, for an
//! application that has set a tracing subscriber, "while the locker's
//! calls, its connect and its `LISTEN` task drive the driver", "any other
//! event of the driver's whose words quote a secret" is "logged instead
//! once the driver returns, at their level, masked and escaped, target
//! `quorum_lock::sql::server_notices`". The only gaps named are an
//! application without a tracing subscriber and the driver's own tasks.
//!
//! What happens instead: `SqlLocker::new` has the driver parse the URL
//! (the check of its parameters, the server it names, the password-file
//! lookup of `remember_pgpass`), and every parse of a URL without a
//! password runs the driver's password-file lookup, which logs
//! `Malformed line in pgpass file` with `line` = the whole line, at WARN,
//! target `sqlx_postgres::options::pgpass`. No masking dispatcher is in
//! place there (it only wraps the polls of the locker's calls), so the
//! application's subscriber gets the line, password and all; the rest is
//! remembered only after the driver logged it.
//!
//! Run in a process of its own (`in_own_process`): it sets `PGPASSFILE` for its whole process.
//! The server is the fake of `tests/sql_support/fake_postgres.rs`, which
//! refuses the login; the break is in the logs before any byte is sent.

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};

/// What a line of the password file holds after its host and port: the
/// password, its database and user fields forgotten (a malformed line).
const PASSWORD: &str = "Wb6tQz2Lr9Xk4Nh7";

#[test]
fn a_malformed_password_file_line_the_driver_logs_is_not_logged_with_its_password() {
    crate::in_own_process(module_path!(), scene);
}

async fn scene() {
    // SAFETY: the scene runs alone in a process of its own (`in_own_process`:
    // one test thread, a current-thread runtime), and no other thread of it
    // reads or writes the environment.
    unsafe { std::env::remove_var("PGPASSWORD") };
    let (logs, _guard) = crate::log_capture::Capture::install();
    let addr = crate::fake_postgres::refusing_logins();
    let file = std::env::temp_dir().join(format!(
        "quorum-lock-pgpass-malformed-{}",
        std::process::id()
    ));
    crate::write_private(&file, format!("*:*:{PASSWORD}\n"));
    // SAFETY: the scene runs alone in a process of its own (`in_own_process`:
    // one test thread, a current-thread runtime), and no other thread of it
    // reads or writes the environment.
    unsafe { std::env::set_var("PGPASSFILE", &file) };
    let url = format!("postgres://app@{addr}/locks?sslmode=disable");
    let config = SqlConfig {
        call_timeout: Duration::from_secs(2),
        ..SqlConfig::default()
    };
    let result = tokio::time::timeout(Duration::from_secs(20), SqlLocker::connect(&url, config))
        .await
        .expect("connect ends within its timeout");
    let _ = std::fs::remove_file(&file);
    assert!(
        result.is_err(),
        "the fake PostgreSQL at {addr} was accepted"
    );
    let lines = logs.lines();
    // The driver did read the malformed line (its warning, masked or not,
    // is in the logs).
    assert!(
        lines
            .iter()
            .any(|l| l.contains("Malformed line") || l.contains("quote a secret")),
        "the driver's warning is nowhere: {lines:#?}"
    );
    for line in &lines {
        for piece in PASSWORD.as_bytes().windows(8) {
            let piece = std::str::from_utf8(piece).expect("ascii");
            assert!(
                !line.contains(piece),
                "a log line shows the password file's line ({piece} is a piece of it): {line}"
            );
        }
    }
}
