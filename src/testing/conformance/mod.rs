//! One behaviour for every locker: a suite that checks that a
//! [`NetLocker`] answers lock, unlock, refresh, force-unlock, listing,
//! waiting and fencing calls as [`LocalLocker`](crate::LocalLocker) does,
//! for anyone who writes a locker for another store.
//!
//! The coordinator's safety argument rests on these rules: a locker that
//! grants a writer beside a reader, or half of a multi-resource lock, or
//! lets a stranger unlock, breaks mutual exclusion for every client above
//! it. Run the suite against a new locker before trusting it, with
//! [`check_locker`].
//!
//! Each check asks the constructor for a locker and uses resource names
//! unique to the run, so a store shared between runs (a database, a Redis
//! node) does not carry one run's entries into the next. Every check
//! releases what it took, even when it fails.

mod abilities;
mod election;
mod rules;

use std::future::Future;
use std::sync::Arc;

use abilities::{fencing, listing, waiting};
use election::election;
use rules::{
    all_or_nothing, bad_arguments, force_unlock_by_resource, force_unlock_by_uid, hostile_text,
    only_holder_unlocks, refresh_knows_holders, relock, writers_exclude,
};

use crate::{Error, LockArgs, NetLocker};

/// What [`check_locker`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ConformanceReport {
    /// The checks the locker passed.
    pub passed: Vec<&'static str>,
    /// The checks of optional abilities (listing, waiting in line, fencing
    /// tokens, leader election) that did not run because the locker does not offer them,
    /// with the reason. A locker that should offer one must not appear
    /// here.
    pub skipped: Vec<(&'static str, String)>,
}

/// A rule the locker broke: which check, and what it answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the locker does not conform to `{check}`: {detail}")]
pub struct NonConformance {
    /// The name of the check.
    pub check: &'static str,
    /// The call that answered wrongly, what was expected and what came back.
    pub detail: String,
}

pub(super) enum Outcome {
    Passed,
    Skipped(String),
}

pub(super) type Checked = Result<Outcome, String>;

/// Runs every check against lockers from `new_locker`, one fresh locker
/// per check, and stops at the first rule broken.
///
/// ```
/// use std::sync::Arc;
/// use quorum_lock::testing::check_locker;
/// use quorum_lock::{LocalLocker, NetLocker};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), quorum_lock::testing::NonConformance> {
/// let report = check_locker(|| async { Arc::new(LocalLocker::new()) as Arc<dyn NetLocker> }).await?;
/// assert!(report.skipped.is_empty(), "{:?}", report.skipped);
/// # Ok(())
/// # }
/// ```
///
/// # Cancel safety
///
/// Not cancel safe: a check dropped halfway may leave its entries on the
/// locker until they expire. Run the suite to the end.
pub async fn check_locker<F, Fut>(mut new_locker: F) -> Result<ConformanceReport, NonConformance>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Arc<dyn NetLocker>>,
{
    let run = format!("conformance-{:016x}", rand::random::<u64>());
    let mut report = ConformanceReport::default();
    macro_rules! check {
        ($name:literal, $check:ident) => {{
            let locker = new_locker().await;
            let names = Names {
                prefix: format!("{run}-{}", $name),
            };
            let outcome = $check(&*locker, &names).await;
            report.record($name, outcome)?;
        }};
    }
    check!("writers exclude everyone, readers share", writers_exclude);
    check!(
        "locking again with the same uid and mode is idempotent",
        relock
    );
    check!(
        "only the holder unlocks, once, in its mode",
        only_holder_unlocks
    );
    check!("several resources are all or nothing", all_or_nothing);
    check!("refresh knows only held uids", refresh_knows_holders);
    check!(
        "force-unlock by uid drops only that uid",
        force_unlock_by_uid
    );
    check!(
        "force-unlock by resource drops every holder",
        force_unlock_by_resource
    );
    check!("bad arguments are errors that grant nothing", bad_arguments);
    check!(
        "an owner, source or uid with control characters is an error that grants nothing",
        hostile_text
    );
    check!("the listing shows every entry", listing);
    check!(
        "waiters queue in ticket order and are pushed their grant",
        waiting
    );
    check!("fencing tokens increase", fencing);
    check!(
        "a proclamation lives with its entry and watches are pushed",
        election
    );
    Ok(report)
}

impl ConformanceReport {
    fn record(&mut self, check: &'static str, outcome: Checked) -> Result<(), NonConformance> {
        match outcome {
            Ok(Outcome::Passed) => self.passed.push(check),
            Ok(Outcome::Skipped(why)) => self.skipped.push((check, why)),
            Err(detail) => return Err(NonConformance { check, detail }),
        }
        Ok(())
    }
}

/// Resource names of one check.
pub(super) struct Names {
    pub(super) prefix: String,
}

impl Names {
    /// Arguments for `uid` (empty stays empty: force-unlock by resource)
    /// on `resources`, both made unique to the check.
    pub(super) fn args(&self, uid: &str, resources: &[&str]) -> LockArgs {
        let uid = if uid.is_empty() {
            String::new()
        } else {
            format!("{}-{uid}", self.prefix)
        };
        LockArgs {
            uid: uid.into(),
            resources: resources
                .iter()
                .map(|r| format!("{}/{r}", self.prefix))
                .collect::<Vec<_>>()
                .into(),
            owner: "conformance".into(),
            source: "quorum_lock::testing::check_locker".into(),
            quorum: 1,
        }
    }
}

/// Asserts the answer of one call.
pub(super) async fn expect(
    what: &str,
    args: &LockArgs,
    call: impl Future<Output = Result<bool, Error>>,
    want: bool,
) -> Result<(), String> {
    match call.await {
        Ok(got) if got == want => Ok(()),
        got => Err(format!(
            "{what} by uid {} on {:?}: expected Ok({want}), got {got:?}",
            args.uid, args.resources
        )),
    }
}

/// Releases whatever a check may have left on the resources of `all`,
/// whatever its outcome.
pub(super) async fn clean(locker: &dyn NetLocker, all: &[&LockArgs]) {
    for args in all {
        let _ = locker.force_unlock(&with_uid(args, "")).await;
    }
}

pub(super) fn with_uid(args: &LockArgs, uid: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        ..args.clone()
    }
}
