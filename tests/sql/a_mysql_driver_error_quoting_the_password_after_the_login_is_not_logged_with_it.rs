//! Reproduces a past break: a MySQL server that lets the login through and then refuses the locker's first statement quoting the password has the password logged whole by the driver's pool (`error returned from after_connect`), since a MySQL locker holds none of the driver's events.
//!
//! docs/sql.md, "Credentials and TLS": user and password "are never shown:
//! `endpoint()`, errors, logs and `Debug`", and "A password the database
//! quotes back (in a login refusal, say) is not shown either: any run of 8
//! or more of its bytes in text the database sends is shown as `***`";
//! while the locker's calls drive the driver, "any other event of the
//! driver's whose words quote a secret (a database error it logs, say)"
//! is held and logged masked. docs/lock-servers.md, threat model: any run
//! of 8 or more bytes of "the password of a Redis or database URL" in text
//! a peer sends is shown as `***`.
//!
//! What happens instead: the locker's pool runs its session statements
//! (`SET SESSION TRANSACTION ISOLATION LEVEL ...`) in the driver's
//! `after_connect` hook; when one fails, the driver (sqlx 0.8,
//! `pool/inner.rs`) logs the error, the server's words and all, at ERROR,
//! `error returned from after_connect`, in the caller's task, once per
//! attempt of the pool. The PostgreSQL locker masks such an event; the
//! MySQL locker has no masking dispatcher at all (`Masking::new(..,
//! false)`: "a MySQL locker, whose driver logs no server text"), so the
//! application's log gets the password, while the locker's own error
//! masks it. A hostile MySQL server learns the password from
//! `caching_sha2_password`'s full authentication over a connection without
//! TLS (the client encrypts it with a public key the server hands it);
//! this fake simply knows it.
//!
//! The server is a fake on a loopback port (`sql_support/fake_mysql.rs`)
//! that lets the login through and answers every statement after the
//! driver's own with an error quoting the password.
#![cfg(feature = "mysql")]

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};

use crate::fake_mysql;
use crate::log_capture::Capture;

/// The password in the URL.
const PASSWORD: &str = "Hq4pW7zT2mN9xB6k";

#[tokio::test]
async fn a_mysql_driver_error_quoting_the_password_after_the_login_is_not_logged_with_it() {
    let (logs, _guard) = Capture::install();
    let addr = fake_mysql::refusing_statements(
        format!("Access denied for a session logged in with '{PASSWORD}'").into_bytes(),
    );
    let config = SqlConfig {
        call_timeout: Duration::from_secs(2),
        ..SqlConfig::default()
    };
    let url = format!("mysql://app:{PASSWORD}@{addr}/locks?ssl-mode=disabled");
    let result = tokio::time::timeout(Duration::from_secs(20), SqlLocker::connect(&url, config))
        .await
        .expect("connect ends within its timeout");
    let err = match result {
        Ok(_) => panic!("the fake MySQL at {addr} was accepted"),
        Err(err) => err,
    };
    let lines = logs.lines();
    // The fake was reached and refused a statement: the locker's error or
    // the logs say so (whether the driver's line is kept or not).
    let said = format!("{err} {lines:?}");
    assert!(
        said.contains("Access denied"),
        "the server's refusal is nowhere (error: {err}): {lines:#?}"
    );
    for line in &lines {
        for piece in PASSWORD.as_bytes().windows(8) {
            let piece = std::str::from_utf8(piece).expect("ascii");
            assert!(
                !line.contains(piece),
                "a log line shows the password ({piece} is a piece of it): {line}"
            );
        }
    }
}
