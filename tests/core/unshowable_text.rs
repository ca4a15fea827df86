//! Text that a listing, a log or an error would show: a lock's owner,
//! source and uid, like its names, must not hold control characters or
//! characters that reverse or break lines. A `LocalLocker` refuses every
//! call that carries one, saying which field and which character, and
//! keeps nothing of it; a `Dsync` refuses such an owner or source when it
//! is built, before any locker is asked.

use std::time::Duration;

use crate::common::*;
use futures::executor::block_on;
use quorum_lock::{
    Dsync, Error, LocalLocker, LockArgs, LockMode, NetLocker, Ticket, WaitArgs, WaitReply,
};

/// Each hostile text, and the character its error must name.
const HOSTILE: [(&str, &str); 7] = [
    ("bob\u{1b}]0;title\u{7}", "U+001B (escape) at byte 3"),
    ("ring\u{7}", "U+0007 (bell) at byte 4"),
    ("bob\nforged-row", "U+000A (line feed) at byte 3"),
    ("over\rwritten", "U+000D (carriage return) at byte 4"),
    ("del\u{7f}", "U+007F (delete) at byte 3"),
    ("abc\u{202e}exe.txt", "U+202E"),
    ("line\u{2028}break", "U+2028"),
];

fn with(field: &str, text: &str) -> LockArgs {
    let mut a = args("u", &["r"]);
    match field {
        "uid" => a.uid = text.into(),
        "owner" => a.owner = text.into(),
        "source" => a.source = text.into(),
        other => unreachable!("{other}"),
    }
    a
}

/// `result` is an `InvalidArgument` naming `field` and `why`, on one line.
fn refused<T: std::fmt::Debug>(result: Result<T, Error>, field: &str, why: &str, call: &str) {
    match result {
        Err(Error::InvalidArgument(message)) => {
            assert!(
                message.contains(&format!("the {field} ")),
                "{call}: the field is not named: {message}"
            );
            assert!(message.contains(why), "{call}: {why:?} missing: {message}");
            assert!(
                !message.contains(['\n', '\r', '\u{1b}', '\u{7}', '\u{7f}', '\u{202e}']),
                "{call}: the message holds the raw text: {message:?}"
            );
        }
        other => panic!("{call} with a hostile {field}: expected InvalidArgument, got {other:?}"),
    }
}

#[test]
fn a_local_locker_refuses_every_call_with_an_unshowable_owner_source_or_uid() {
    let locker = LocalLocker::new();
    let wait = WaitArgs {
        ticket: Ticket { at: 1, tiebreak: 1 },
        place_ttl: Duration::from_secs(30),
        wake: None,
    };
    block_on(async {
        for (text, why) in HOSTILE {
            for field in ["uid", "owner", "source"] {
                let bad = with(field, text);
                refused(locker.lock(&bad).await, field, why, "lock");
                refused(locker.rlock(&bad).await, field, why, "rlock");
                refused(locker.unlock(&bad).await, field, why, "unlock");
                refused(locker.runlock(&bad).await, field, why, "runlock");
                refused(locker.refresh(&bad).await, field, why, "refresh");
                refused(
                    locker.refresh_mode(&bad, LockMode::Write).await,
                    field,
                    why,
                    "refresh_mode",
                );
                refused(
                    locker.lock_wait(&bad, LockMode::Read, &wait).await,
                    field,
                    why,
                    "lock_wait",
                );
                refused(
                    locker.fence(&bad, LockMode::Write, 0).await,
                    field,
                    why,
                    "fence",
                );
                refused(locker.force_unlock(&bad).await, field, why, "force_unlock");
            }
            // Forcing by uid alone checks the uid too.
            let mut by_uid = with("uid", text);
            by_uid.resources = Vec::new().into();
            refused(
                locker.force_unlock(&by_uid).await,
                "uid",
                why,
                "force_unlock by uid",
            );
        }
    });
    assert!(locker.snapshot().is_empty(), "{:?}", locker.snapshot());
    assert_eq!(locker.waiting(), 0, "a refused wait kept a place");
    // Printable text, Unicode included, is fine.
    let mut fine = args("u-é", &["r"]);
    fine.owner = "bäckerei:42 (日本)".into();
    fine.source = "src/main.rs:1:1 — nightly".into();
    assert_eq!(
        block_on(locker.lock_wait(&fine, LockMode::Write, &wait)).unwrap(),
        WaitReply::Granted
    );
    assert_eq!(locker.snapshot()[0].owner, "bäckerei:42 (日本)");
}

#[test]
fn a_coordinator_refuses_an_unshowable_owner_or_source_when_it_is_built() {
    for (text, why) in HOSTILE {
        let built = Dsync::builder(as_lockers(&nodes(1))).owner(text).build();
        refused(built, "owner", why, "build");
        let (ds, _) = cluster(1);
        refused(ds.with_source(text), "source", why, "with_source");
    }
}

#[test]
fn resource_names_that_reverse_or_break_lines_are_refused_too() {
    let (ds, nodes) = cluster(1);
    for name in ["abc\u{202e}txt", "a\u{2066}b", "one\u{2029}two"] {
        match ds.rw_mutex([name]) {
            Err(Error::InvalidArgument(message)) => {
                assert!(message.contains("resource name"), "{message}")
            }
            other => panic!("{name:?}: expected InvalidArgument, got {:?}", other.err()),
        }
        let raw = args("u", &[name]);
        assert!(matches!(
            block_on(nodes[0].lock(&raw)),
            Err(Error::InvalidArgument(_))
        ));
    }
    assert!(nodes[0].snapshot().is_empty());
}
