//! A database URL whose text before `://` is no scheme (the scheme left
//! out, so that what comes first is `user:password@host...`, and a `://`
//! appears later, in a query parameter) is refused without showing that
//! text: docs/sql.md says the password is never shown in errors, and
//! `redact_url` hides whatever precedes `://` when it is no plausible
//! scheme, since it may be a password typed in the wrong place.

use quorum_lock::sql::{SqlConfig, SqlLocker};

#[test]
fn a_password_before_the_only_scheme_separator_never_shows_in_the_error() {
    for url in [
        // The scheme left out; a file URL in a query parameter.
        "locker:Hunter2Secret@db.internal:5432/locks?sslrootcert=file:///etc/ca.pem",
        // A password typed before the scheme.
        "locker:Hunter2Secret@postgres://db.internal:5432/locks",
    ] {
        let err = match SqlLocker::new(url, SqlConfig::default()) {
            Ok(_) => panic!("{url}: accepted"),
            Err(err) => err,
        };
        for text in [err.to_string(), format!("{err:?}")] {
            assert!(
                !text.contains("Hunter2Secret"),
                "the password shows in the error of {url:?}: {text}"
            );
        }
    }
}
