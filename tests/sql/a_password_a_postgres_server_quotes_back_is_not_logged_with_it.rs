//! The password a PostgreSQL server quotes back (in a notice, or in its
//! error to a statement after the login) never reaches the application's
//! logs: a hostile server, or without TLS anyone answering in its place,
//! learns nothing it could not see, but the logs' readers must not learn
//! the password. Each scene: a fake PostgreSQL (`fake_postgres`) playing
//! one script, a locker connecting to it with a password in its URL, and
//! every line the process logs searched for 8-byte pieces of it.
#![cfg(feature = "postgres")]

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};

use crate::fake_postgres::{serving, Script};
use crate::log_capture::Capture;

/// Reproduces a past break: a PostgreSQL server that lets the login through and then refuses the locker's first statement quoting the password has the password logged whole by the driver's pool (`error returned from after_connect`), from within the locker's own call.
///
/// docs/sql.md, "Credentials and TLS": user and password "are never shown:
/// `endpoint()`, errors, logs and `Debug`", and "A password the database
/// quotes back (in a login refusal, say) is not shown either: any run of 8
/// or more of its bytes in text the database sends is shown as `***`."
/// The section then says how the driver's notices are held and logged
/// masked while the locker's calls drive the driver; the only gap it
/// names is a notice read in the driver's own pool task.
///
/// What happens instead: the locker's pool runs its statements in the
/// driver's `after_connect` hook (`src/sql/store.rs`); when one fails, the
/// driver (sqlx 0.8, `pool/inner.rs`) logs the error, server's words and
/// all, at ERROR, target `sqlx::pool::inner`, `error returned from
/// after_connect`, in the caller's task, within the locker's masked poll.
/// The masking dispatcher holds only the target `sqlx::postgres::notice`
/// and passes this event on unchanged, so the application's logs get the
/// password, while the locker's own error masks it.
///
/// The server is a fake on a loopback port speaking just enough of the
/// PostgreSQL protocol (no database needed): it declines TLS, asks for a
/// cleartext password, lets the login through, and answers the first
/// statement with an error quoting the password. One thread, a bounded
/// number of connections, every read bounded in time.
#[tokio::test]
async fn a_driver_error_quoting_the_password_after_the_login_is_not_logged_with_it() {
    // The fake was reached and refused a statement: the locker's error or
    // the logs say so (whether the driver's line is kept or not).
    connect_and_check_the_logs(
        Script::FailStatements,
        "Tg8nV3cQ6rK1yM5w",
        Duration::from_secs(2),
        "permission denied",
    )
    .await;
}

/// Reproduces a past break: a PostgreSQL server that sends a notice quoting the password it was sent has the password logged whole (the driver logs notices, target `sqlx::postgres::notice`).
///
/// docs/sql.md, "Credentials and TLS": user and password "are never shown:
/// `endpoint()`, errors, logs and `Debug`", and "A password the database
/// quotes back (in a login refusal, say) is not shown either: any run of 8
/// or more of its bytes in text the database sends is shown as `***`."
/// The masking is applied to the words the locker puts in its errors; the
/// PostgreSQL driver (sqlx) logs every `NoticeResponse` the server sends,
/// as the server wrote it, through `tracing` in the application's process
/// (a warning at WARN), where nothing masks it. A hostile server, or
/// without TLS anyone answering in its place, puts the password it was
/// sent in the application's logs.
///
/// The server is a fake on a loopback port speaking just enough of the
/// PostgreSQL protocol (no database needed): it declines TLS, asks for a
/// cleartext password, sends a warning quoting it, then refuses the login.
/// One thread, a bounded number of connections, every read bounded in time.
#[tokio::test]
async fn a_notice_quoting_the_password_is_not_logged_with_it() {
    connect_and_check_the_logs(
        Script::NoticeThenRefuse,
        "Zq7pW2xK9mN4vB8c",
        Duration::from_secs(3),
        "login attempt",
    )
    .await;
}

/// Connects a locker with `password` to a fake playing `script`, which
/// must refuse it; then checks that `seen` (the server's words) is in its
/// error or the logs, and that no logged line quotes the password.
async fn connect_and_check_the_logs(
    script: Script,
    password: &str,
    call_timeout: Duration,
    seen: &str,
) {
    let (logs, _guard) = Capture::install();
    let addr = serving(script);
    let config = SqlConfig {
        call_timeout,
        ..SqlConfig::default()
    };
    let url = format!("postgres://app:{password}@{addr}/locks?sslmode=disable");
    let result = tokio::time::timeout(Duration::from_secs(20), SqlLocker::connect(&url, config))
        .await
        .expect("connect ends within its timeout");
    let err = match result {
        Ok(_) => panic!("the fake PostgreSQL at {addr} was accepted"),
        Err(err) => err,
    };
    let lines = logs.lines();
    let said = format!("{err} {lines:?}");
    assert!(
        said.contains(seen),
        "the server's words ({seen:?}) are nowhere (error: {err}): {lines:#?}"
    );
    for line in &lines {
        for piece in password.as_bytes().windows(8) {
            let piece = std::str::from_utf8(piece).expect("ascii");
            assert!(
                !line.contains(piece),
                "a log line shows the password ({piece} is a piece of it): {line}"
            );
        }
    }
}
