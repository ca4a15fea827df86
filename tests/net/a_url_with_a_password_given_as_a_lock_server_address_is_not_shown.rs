//! Reproduces a past break: `connect_all` refusing a Redis or database URL (or a whole mixed `QUORUM_LOCK_NODES` list) given as a lock server address quoted it, password and all, in its error.
//!
//! docs/redis.md and docs/sql.md: errors, logs and `Debug` output never
//! show a URL's password; docs/cli.md: `QUORUM_LOCK_NODES` is a list that
//! may hold `redis://` and database URLs with passwords. A program that
//! hands such a list (or one of its URLs) to `connect_all` gets an
//! `Error::InvalidArgument` that quotes the entry as given:
//! `lock server address 'redis://:S3cretPw1@cache:6379': expected
//! host:port ...`. The entry should be named without its credentials (as
//! `redact_url` shows it, or by its place), as everywhere else.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::{connect_all, RemoteConfig};

#[tokio::test]
async fn a_url_with_a_password_given_as_a_lock_server_address_is_not_shown() {
    for (node, secret) in [
        ("redis://:S3cretPw1@cache:6379", "S3cretPw1"),
        ("postgres://app:S3cretPw2@db:5432/locks", "S3cretPw2"),
        ("mysql://app:S3cretPw3@db/locks", "S3cretPw3"),
        // The whole of a mixed QUORUM_LOCK_NODES, not split at its commas.
        ("10.0.0.1:7070,redis://:S3cretPw4@cache:6379", "S3cretPw4"),
    ] {
        let result = tokio::time::timeout(
            Duration::from_secs(10),
            connect_all([node], RemoteConfig::new("client-token")),
        )
        .await
        .expect("connect_all ends: nothing to connect to");
        let err = match result {
            Ok(_) => panic!("{node}: accepted as a lock server address"),
            Err(err) => err,
        };
        let shown = format!("{err} / {err:?}");
        assert!(
            !shown.contains(secret),
            "the error shows the password {secret:?} of the entry: {shown}"
        );
    }
}
