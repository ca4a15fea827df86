//! A restarted locker re-creates a holder's entry from its refresh during
//! the quarantine, except for a uid it released (docs/safety.md, rule 2).
//! An unlock it refuses for its arguments released nothing anywhere, and
//! must leave nothing behind that stops the re-creation. (An unlock that
//! finds nothing held must be remembered: the late refresh may not have
//! arrived yet.)
#![cfg(feature = "testing")]

use quorum_lock::{LocalLocker, LockArgs, LockMode, LockerConfig, NetLocker};

fn args(uid: &str, names: &[&str]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names.iter().map(|s| s.to_string()).collect(),
        owner: "holder".into(),
        source: "tests/core/refused_unlocks_in_quarantine.rs".into(),
        quorum: 2,
    }
}

fn holds(node: &LocalLocker, uid: &str, name: &str) -> bool {
    node.snapshot()
        .iter()
        .any(|l| l.uid == uid && l.resource == name)
}

#[tokio::test(start_paused = true)]
async fn an_unlock_refused_for_its_arguments_does_not_stop_a_holders_refresh_re_creating_its_entry()
{
    // Refused for its arguments: no resource names.
    let node = LocalLocker::with_config("restarted", LockerConfig::default());
    node.restart();
    let refused = node.unlock(&args("h", &[])).await;
    assert!(refused.is_err(), "{refused:?}");
    let _ = node.refresh_mode(&args("h", &["x"]), LockMode::Write).await;
    let after_invalid = holds(&node, "h", "x");

    assert!(
        after_invalid,
        "an unlock refused for its arguments kept the holder's refresh from re-creating its entry"
    );
}
