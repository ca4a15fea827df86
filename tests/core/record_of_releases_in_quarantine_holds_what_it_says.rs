//! docs/safety.md (Restarts, rule 2): a restarted locker remembers the uids
//! it released during its quarantine "up to 8 MiB of them, about 40,000
//! of the library's own uids", so that a refresh sent before a release and delivered after it
//! does not bring the released entry back (src/local/ended.rs: "what the
//! bound gives up is a refresh delayed past about 40,000 later releases").
//! The figure once said 90,000, from an older, lower count of what each
//! recorded uid costs; this test found it wrong.
//! Here the uids are the library's own (hyphenated UUIDs, 36 bytes), and
//! the late refresh follows 40,000 later releases.
#![cfg(feature = "testing")]

use quorum_lock::{LocalLocker, LockArgs, LockMode, LockerConfig, NetLocker};

fn args(uid: &str, names: &[&str]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names.iter().map(|s| s.to_string()).collect(),
        owner: "holder".into(),
        source: "tests/core/record_of_releases_in_quarantine_holds_what_it_says.rs".into(),
        quorum: 2,
    }
}

/// A version-4 UUID in its hyphenated form, as the library draws them.
fn uuid(i: u64) -> String {
    format!(
        "{:08x}-0000-4000-8000-{:012x}",
        (i >> 48) & 0xffff_ffff,
        i & 0xffff_ffff_ffff
    )
}

#[tokio::test(start_paused = true)]
async fn a_release_is_remembered_through_forty_thousand_later_releases() {
    let node = LocalLocker::with_config("restarted", LockerConfig::default());
    node.restart();
    let resigned = uuid(1 << 40);
    assert_eq!(resigned.len(), 36);
    // The resigned leader's release reaches the restarted locker.
    let _ = node.unlock(&args(&resigned, &["election/e"])).await;
    // Other clients' releases, each of a lock of its own.
    let later = 40_000u64;
    for i in 0..later {
        let _ = node.unlock(&args(&uuid(i), &["other"])).await;
    }
    // The resigned leader's refresh, sent before its release, arrives.
    let _ = node
        .refresh_mode(&args(&resigned, &["election/e"]), LockMode::Write)
        .await;
    let back = node
        .snapshot()
        .iter()
        .any(|l| l.uid == resigned && l.resource == "election/e");
    assert!(
        node.is_quarantined(),
        "the test must run within the quarantine"
    );
    assert!(
        !back,
        "a late refresh re-created the entry of a uid released {later} releases earlier, \
         within the quarantine (the docs say about 40,000 are remembered)"
    );
}
