//! Places in line of uids an admin forced open by name: they go at the
//! force, wherever they stand, and nothing they kept waiting waits for
//! them to expire.
//!
//! docs/lock-servers.md (admin): the forced holders' places in line end
//! too, and no line that moves on grants a place of a forced uid.

use std::sync::Arc;

use futures::executor::block_on;

use super::args;
use super::pushed::{long_lived, pushed, Grants};
use crate::{LocalLocker, LockMode, NetLocker, WaitArgs, WaitReply};

fn wait(l: &LocalLocker, uid: &str, names: &[&str], wait: &WaitArgs) -> WaitReply {
    block_on(l.lock_wait(&args(uid, names), LockMode::Write, wait)).unwrap()
}

fn holders(l: &LocalLocker, name: &str) -> Vec<String> {
    let mut uids: Vec<String> = l
        .snapshot()
        .into_iter()
        .filter(|e| e.resource == name)
        .map(|e| e.uid)
        .collect();
    uids.sort();
    uids
}

/// The scene of the next test, run in a child process: a stack overflow
/// aborts the whole process, which the test harness cannot catch.
const CHAIN_SCENE: &str = "QUORUM_LOCK_TEST_FORCED_CHAIN_SCENE";

/// Readers of "x", each waiting for the write lock on two names of a
/// chain (c0, c1), (c1, c2), ... behind the one before it; c0 is held.
/// The admin forces "x" open by name, then c0's holder lets go. Ending one
/// forced reader's place moved the next line on, which found the next
/// forced reader's place and ended it, and so on: once a recursion of
/// four calls per link, which overflowed the stack of a lock server (a
/// debug build needed about 1,200 links; here 20,000 on a 1 MiB stack).
fn chain_scene() {
    const READERS: usize = 20_000;
    let l = long_lived();
    let grants = Arc::new(Grants::default());
    assert!(block_on(l.lock(&args("B", &["c0"]))).unwrap());
    for i in 0..READERS {
        let uid = format!("u{i}");
        assert!(block_on(l.rlock(&args(&uid, &["x"]))).unwrap());
        let (a, b) = (format!("c{i}"), format!("c{}", i + 1));
        assert_eq!(
            wait(&l, &uid, &[&a, &b], &pushed(i as u64 + 1, &grants)),
            WaitReply::Queued,
            "{uid} waits behind the one before it"
        );
    }
    assert!(l.force_unlock_as(&args("", &["x"]), true).unwrap());
    assert!(block_on(l.unlock(&args("B", &["c0"]))).unwrap());
    let granted = grants.take();
    assert!(
        granted.is_empty(),
        "no forced reader is granted: {} were, first {:?}",
        granted.len(),
        granted.first()
    );
    assert_eq!(l.waiting(), 0, "every forced reader's place is gone");
    assert!(l.snapshot().is_empty(), "nothing is held");
}

#[test]
fn a_force_by_name_of_many_readers_waiting_in_a_chain_ends_their_places_without_overflowing() {
    if std::env::var_os(CHAIN_SCENE).is_some() {
        let scene = std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(chain_scene)
            .unwrap();
        if let Err(panic) = scene.join() {
            std::panic::resume_unwind(panic);
        }
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "local::tests::forced_places::a_force_by_name_of_many_readers_waiting_in_a_chain_ends_their_places_without_overflowing",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHAIN_SCENE, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the scene failed ({}): {stderr}\n{stdout}",
        out.status
    );
}

/// U, holding "x", waits for the write lock on "z" (free) and "v" (held
/// by P): its place stands first in z's line. W waits behind it, for the
/// write lock on `w_waits_on`. The admin forces "x" open by name. U's
/// place on "z" may never be granted, so W must not wait for it to
/// expire: at the latest once "w" (held by Q) comes free, W holds its
/// names.
fn forced_place_ahead_on_a_free_name(w_waits_on: &[&str]) {
    let l = long_lived();
    let grants = Arc::new(Grants::default());
    for (uid, name) in [("P", "v"), ("U", "x"), ("Q", "w")] {
        assert!(block_on(l.lock(&args(uid, &[name]))).unwrap());
    }
    assert_eq!(
        wait(&l, "U", &["z", "v"], &pushed(1, &grants)),
        WaitReply::Queued
    );
    assert_eq!(
        wait(&l, "W", w_waits_on, &pushed(2, &grants)),
        WaitReply::Queued,
        "W waits behind U's place on z"
    );
    assert!(l.force_unlock_as(&args("", &["x"]), true).unwrap());
    assert!(block_on(l.unlock(&args("Q", &["w"]))).unwrap());
    assert_eq!(grants.take(), ["W"], "W waiting on {w_waits_on:?}");
    for name in w_waits_on {
        assert_eq!(holders(&l, name), ["W"], "{name}");
    }
    assert_eq!(l.waiting(), 0, "U's place is gone");
    assert_eq!(holders(&l, "v"), ["P"]);
}

#[test]
fn a_forced_holders_place_ahead_on_a_free_name_does_not_hold_up_a_spanning_waiter() {
    forced_place_ahead_on_a_free_name(&["z", "w"]);
}

#[test]
fn a_forced_holders_place_ahead_on_a_free_name_does_not_hold_up_the_waiter_behind_it() {
    forced_place_ahead_on_a_free_name(&["z"]);
}
