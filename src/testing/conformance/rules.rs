//! The rules every locker must answer by: exclusion, idempotence per uid,
//! unlock by the holder only, all-or-nothing multi-resource locks,
//! refresh, force-unlock, bad arguments, and text that listings could not
//! show safely.

use std::time::Duration;

use super::{clean, expect, with_uid, Checked, Names, Outcome};
use crate::{Error, LockMode, NetLocker, Ticket, WaitArgs, WaitReply};

pub(super) async fn writers_exclude(l: &dyn NetLocker, n: &Names) -> Checked {
    let (r1, r2, w, w2) = (
        n.args("r1", &["x"]),
        n.args("r2", &["x"]),
        n.args("w", &["x"]),
        n.args("w2", &["x"]),
    );
    let result = async {
        expect("rlock", &r1, l.rlock(&r1), true).await?;
        expect("rlock", &r2, l.rlock(&r2), true).await?;
        expect("lock beside readers", &w, l.lock(&w), false).await?;
        expect("runlock", &r1, l.runlock(&r1), true).await?;
        expect("runlock", &r2, l.runlock(&r2), true).await?;
        expect("lock of a free resource", &w, l.lock(&w), true).await?;
        expect("rlock beside a writer", &r1, l.rlock(&r1), false).await?;
        expect("lock beside a writer", &w2, l.lock(&w2), false).await?;
        expect("unlock", &w, l.unlock(&w), true).await
    }
    .await;
    clean(l, &[&w]).await;
    result.map(|()| Outcome::Passed)
}

pub(super) async fn relock(l: &dyn NetLocker, n: &Names) -> Checked {
    let (w, r) = (n.args("w", &["x"]), n.args("r", &["y"]));
    let result = async {
        expect("lock", &w, l.lock(&w), true).await?;
        expect("the same lock again", &w, l.lock(&w), true).await?;
        expect("rlock", &r, l.rlock(&r), true).await?;
        expect("the same rlock again", &r, l.rlock(&r), true).await?;
        expect("rlock by the writer's uid", &w, l.rlock(&w), false).await?;
        expect("lock by the reader's uid", &r, l.lock(&r), false).await?;
        expect("one unlock after two locks", &w, l.unlock(&w), true).await?;
        expect("one runlock after two rlocks", &r, l.runlock(&r), true).await?;
        let other = n.args("other", &["x", "y"]);
        expect(
            "lock after the single unlocks",
            &other,
            l.lock(&other),
            true,
        )
        .await?;
        expect("unlock", &other, l.unlock(&other), true).await
    }
    .await;
    clean(l, &[&w, &r]).await;
    result.map(|()| Outcome::Passed)
}

pub(super) async fn only_holder_unlocks(l: &dyn NetLocker, n: &Names) -> Checked {
    let (w, other, r) = (
        n.args("w", &["x"]),
        n.args("other", &["x"]),
        n.args("r", &["x"]),
    );
    let result = async {
        expect("lock", &w, l.lock(&w), true).await?;
        expect("unlock by a stranger", &other, l.unlock(&other), false).await?;
        expect("runlock of a write lock", &w, l.runlock(&w), false).await?;
        expect("unlock", &w, l.unlock(&w), true).await?;
        expect("a second unlock", &w, l.unlock(&w), false).await?;
        expect("rlock", &r, l.rlock(&r), true).await?;
        expect("unlock of a read lock", &r, l.unlock(&r), false).await?;
        expect("runlock by a stranger", &other, l.runlock(&other), false).await?;
        expect("runlock", &r, l.runlock(&r), true).await
    }
    .await;
    clean(l, &[&w]).await;
    result.map(|()| Outcome::Passed)
}

pub(super) async fn all_or_nothing(l: &dyn NetLocker, n: &Names) -> Checked {
    let many: Vec<String> = (0..40).map(|i| format!("res-{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let holder = n.args("holder", &["res-17"]);
    let (w, r) = (n.args("w", &many), n.args("r", &many));
    let result = async {
        expect("lock", &holder, l.lock(&holder), true).await?;
        expect("lock over a held resource", &w, l.lock(&w), false).await?;
        expect("rlock over a held resource", &r, l.rlock(&r), false).await?;
        // Nothing of the refused locks may remain: each free name is free.
        // A uid is used for one lock only: a lock server refuses a uid it
        // saw released (PROTOCOL.md, "Released uids").
        for name in many.iter().filter(|m| **m != "res-17") {
            let probe = n.args(&format!("probe-{name}"), &[name]);
            expect(
                "lock of a name a refused lock named",
                &probe,
                l.lock(&probe),
                true,
            )
            .await?;
            expect("unlock", &probe, l.unlock(&probe), true).await?;
        }
        expect("unlock", &holder, l.unlock(&holder), true).await?;
        expect("rlock of every name", &r, l.rlock(&r), true).await?;
        let partial = n.args("w", &["res-3", "elsewhere"]);
        expect(
            "lock over one read-held name",
            &partial,
            l.lock(&partial),
            false,
        )
        .await?;
        let elsewhere = n.args("probe-elsewhere", &["elsewhere"]);
        expect(
            "lock of the other name",
            &elsewhere,
            l.lock(&elsewhere),
            true,
        )
        .await?;
        expect("unlock", &elsewhere, l.unlock(&elsewhere), true).await?;
        expect("runlock of every name", &r, l.runlock(&r), true).await
    }
    .await;
    clean(l, &[&w, &n.args("", &["elsewhere"])]).await;
    result.map(|()| Outcome::Passed)
}

pub(super) async fn refresh_knows_holders(l: &dyn NetLocker, n: &Names) -> Checked {
    let w = n.args("w", &["a", "b"]);
    let result = async {
        expect("lock", &w, l.lock(&w), true).await?;
        expect("refresh by the holder", &w, l.refresh(&w), true).await?;
        let stranger = n.args("stranger", &["a"]);
        expect(
            "refresh by a stranger",
            &stranger,
            l.refresh(&stranger),
            false,
        )
        .await?;
        let partly = n.args("w", &["a", "c"]);
        expect(
            "refresh of a partly held lock",
            &partly,
            l.refresh(&partly),
            false,
        )
        .await?;
        expect("unlock", &w, l.unlock(&w), true).await?;
        expect("refresh after the unlock", &w, l.refresh(&w), false).await
    }
    .await;
    clean(l, &[&w]).await;
    result.map(|()| Outcome::Passed)
}

pub(super) async fn force_unlock_by_uid(l: &dyn NetLocker, n: &Names) -> Checked {
    let (r1, r2) = (n.args("r1", &["a", "b"]), n.args("r2", &["a"]));
    let result = async {
        expect("rlock", &r1, l.rlock(&r1), true).await?;
        expect("rlock", &r2, l.rlock(&r2), true).await?;
        let by_uid = n.args("r1", &[]);
        expect(
            "force-unlock by uid",
            &by_uid,
            l.force_unlock(&by_uid),
            true,
        )
        .await?;
        expect("refresh of the forced uid", &r1, l.refresh(&r1), false).await?;
        expect("refresh of another reader", &r2, l.refresh(&r2), true).await?;
        expect(
            "a second force-unlock by uid",
            &by_uid,
            l.force_unlock(&by_uid),
            false,
        )
        .await?;
        expect("runlock", &r2, l.runlock(&r2), true).await
    }
    .await;
    clean(l, &[&r1]).await;
    result.map(|()| Outcome::Passed)
}

pub(super) async fn force_unlock_by_resource(l: &dyn NetLocker, n: &Names) -> Checked {
    let (r, w) = (n.args("r", &["a", "b"]), n.args("w", &["c"]));
    let result =
        async {
            expect("rlock", &r, l.rlock(&r), true).await?;
            expect("lock", &w, l.lock(&w), true).await?;
            let by_name = n.args("", &["a", "c"]);
            match l.force_unlock(&by_name).await {
                Ok(true) => {}
                Ok(false) => return Err(
                    "force-unlock by resource of held resources: expected Ok(true), got Ok(false)"
                        .into(),
                ),
                Err(err) => {
                    return Ok(Outcome::Skipped(format!(
                    "force-unlock by resource was refused (an admin's call on lock servers): {err}"
                )))
                }
            }
            expect(
                "refresh of a reader forced on one of its names",
                &r,
                l.refresh(&r),
                false,
            )
            .await?;
            expect("refresh of the forced writer", &w, l.refresh(&w), false).await?;
            let again = n.args("", &["c"]);
            expect(
                "force-unlock of a free resource",
                &again,
                l.force_unlock(&again),
                false,
            )
            .await?;
            Ok(Outcome::Passed)
        }
        .await;
    // A client that may not force resources open releases by uid instead.
    let _ = l.runlock(&r).await;
    let _ = l.unlock(&w).await;
    clean(l, &[&r, &w]).await;
    result
}

pub(super) async fn bad_arguments(l: &dyn NetLocker, n: &Names) -> Checked {
    let long = "x".repeat(crate::MAX_RESOURCE_NAME_LEN + 1);
    let mut no_names = n.args("u", &["a"]);
    no_names.resources = Vec::new().into();
    let mut empty_name = n.args("u", &["a"]);
    empty_name.resources = vec![String::new()].into();
    let mut long_name = n.args("u", &["a"]);
    long_name.resources = vec![long].into();
    let no_uid = with_uid(&n.args("u", &["a"]), "");
    for bad in [&no_names, &empty_name, &long_name, &no_uid] {
        let answers = [
            ("lock", l.lock(bad).await),
            ("rlock", l.rlock(bad).await),
            ("refresh", l.refresh(bad).await),
        ];
        for (call, answer) in answers {
            if !matches!(answer, Err(Error::InvalidArgument(_))) {
                clean(l, &[&n.args("", &["a"])]).await;
                return Err(format!(
                    "{call} with uid {:?} on {:?}: expected Err(InvalidArgument), got {answer:?}",
                    bad.uid, bad.resources
                ));
            }
        }
    }
    let probe = n.args("probe", &["a"]);
    let result = async {
        expect("lock after the bad calls", &probe, l.lock(&probe), true).await?;
        expect("unlock", &probe, l.unlock(&probe), true).await
    }
    .await;
    clean(l, &[&probe]).await;
    result.map(|()| Outcome::Passed)
}

/// Text that would forge or hide lines where listings and logs show it:
/// control characters (newline, carriage return, escape, bell, delete),
/// and characters that reverse or break lines of text.
pub(super) const HOSTILE_TEXT: [&str; 7] = [
    "bob\u{1b}]0;title\u{7}",
    "two\nlines",
    "over\rwritten",
    "del\u{7f}",
    "\u{1b}[2Jcleared",
    "reversed\u{202e}txt.exe",
    "line\u{2028}separator",
];

pub(super) async fn hostile_text(l: &dyn NetLocker, n: &Names) -> Checked {
    let wait = WaitArgs {
        ticket: Ticket { at: 1, tiebreak: 1 },
        place_ttl: Duration::from_secs(30),
        wake: None,
    };
    for text in HOSTILE_TEXT {
        let mut cases = Vec::new();
        let mut owner = n.args("u", &["a"]);
        owner.owner = text.into();
        cases.push(("owner", owner));
        let mut source = n.args("u", &["a"]);
        source.source = text.into();
        cases.push(("source", source));
        let uid = n.args("u", &["a"]);
        cases.push(("uid", with_uid(&uid, &format!("{}{text}", uid.uid))));
        for (field, bad) in &cases {
            let answers = [
                ("lock", l.lock(bad).await),
                ("rlock", l.rlock(bad).await),
                ("refresh", l.refresh_mode(bad, LockMode::Write).await),
                (
                    "lock_wait",
                    l.lock_wait(bad, LockMode::Write, &wait)
                        .await
                        .map(|reply| reply == WaitReply::Granted),
                ),
            ];
            for (call, answer) in answers {
                if !matches!(answer, Err(Error::InvalidArgument(_))) {
                    clean(l, &[&n.args("", &["a"])]).await;
                    return Err(format!(
                        "{call} with the {field} {text:?}: expected Err(InvalidArgument), got \
                         {answer:?}"
                    ));
                }
            }
        }
    }
    // Nothing was granted or queued: a writer gets the resource at once.
    let probe = n.args("probe", &["a"]);
    let result = async {
        expect("lock after the refused calls", &probe, l.lock(&probe), true).await?;
        expect("unlock", &probe, l.unlock(&probe), true).await
    }
    .await;
    clean(l, &[&probe]).await;
    result.map(|()| Outcome::Passed)
}
