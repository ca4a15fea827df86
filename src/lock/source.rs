//! Where a lock was taken, as listings show it ([`LockInfo::source`]): the
//! caller's `file:line:column` unless the application says something more
//! useful with [`Dsync::with_source`](crate::Dsync::with_source), such as
//! the command line of the job that holds the lock.
//!
//! [`LockInfo::source`]: crate::LockInfo::source

use std::panic::Location;
use std::sync::Arc;

use crate::locker::args::validate_text;
use crate::Error;

/// Longest source every locker accepts, checked here when a source is set,
/// so that a source no locker would take is refused at once.
pub(crate) use crate::locker::args::MAX_SOURCE_LEN;

/// The source recorded with a lock: the one set, or the caller's location.
pub(crate) fn or_caller(set: Option<&Arc<str>>, caller: &Location<'_>) -> Arc<str> {
    match set {
        Some(source) => source.clone(),
        None => format!("{}:{}:{}", caller.file(), caller.line(), caller.column()).into(),
    }
}

/// A source a listing can show on one line, and every locker accepts:
/// not empty, at most [`MAX_SOURCE_LEN`] bytes, nothing
/// [`LockArgs::validate_text`](crate::LockArgs::validate_text) refuses.
pub(crate) fn check(source: &str) -> Result<(), Error> {
    if source.trim().is_empty() {
        return Err(Error::invalid("the source must not be empty"));
    }
    if source.len() > MAX_SOURCE_LEN {
        return Err(Error::invalid(format!(
            "source of {} bytes; at most {MAX_SOURCE_LEN} are allowed",
            source.len()
        )));
    }
    validate_text("source", source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_checked() {
        assert!(check("run: ./backup.sh --full").is_ok());
        for bad in ["", "  ", "two\nlines", "tab\there"] {
            assert!(check(bad).is_err(), "{bad:?} accepted");
        }
        let long = "x".repeat(MAX_SOURCE_LEN + 1);
        let err = check(&long).expect_err("too long");
        assert!(err.to_string().contains("513 bytes"), "{err}");
        assert!(check(&long[1..]).is_ok());
    }
}
