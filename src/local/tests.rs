//! Unit tests of the `LocalLocker` rules.

use std::sync::Arc;

use futures::executor::block_on;

use crate::{Error, LocalLocker, LockArgs, LockMode, NetLocker};

fn args(uid: &str, resources: &[&str]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: resources
            .iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .into(),
        owner: "owner".into(),
        source: "test".into(),
        quorum: 1,
    }
}

/// (resource, uid, mode) of every entry, sorted.
fn entries(locker: &LocalLocker) -> Vec<(String, String, LockMode)> {
    locker
        .snapshot()
        .into_iter()
        .map(|i| (i.resource, i.uid, i.mode))
        .collect()
}

#[test]
fn writer_excludes_everyone_and_readers_share() {
    let l = LocalLocker::new();
    block_on(async {
        assert!(l.rlock(&args("r1", &["x"])).await.unwrap());
        assert!(l.rlock(&args("r2", &["x"])).await.unwrap());
        assert!(!l.lock(&args("w", &["x"])).await.unwrap());
        assert!(l.runlock(&args("r1", &["x"])).await.unwrap());
        assert!(l.runlock(&args("r2", &["x"])).await.unwrap());
        assert!(l.lock(&args("w", &["x"])).await.unwrap());
        assert!(!l.rlock(&args("r3", &["x"])).await.unwrap());
        assert!(!l.lock(&args("w2", &["x"])).await.unwrap());
    });
    assert_eq!(entries(&l), [("x".into(), "w".into(), LockMode::Write)]);
}

#[test]
fn relock_with_same_uid_is_idempotent() {
    let l = LocalLocker::new();
    block_on(async {
        assert!(l.lock(&args("w", &["x"])).await.unwrap());
        assert!(l.lock(&args("w", &["x"])).await.unwrap());
        assert_eq!(l.snapshot().len(), 1);
        assert!(l.rlock(&args("r", &["y"])).await.unwrap());
        assert!(l.rlock(&args("r", &["y"])).await.unwrap());
        assert_eq!(l.snapshot().len(), 2);
        // The other mode is a conflict, even for the same uid.
        assert!(!l.rlock(&args("w", &["x"])).await.unwrap());
        assert!(!l.lock(&args("r", &["y"])).await.unwrap());
        // One unlock frees the re-locked entry completely.
        assert!(l.unlock(&args("w", &["x"])).await.unwrap());
        assert!(l.runlock(&args("r", &["y"])).await.unwrap());
    });
    assert!(l.snapshot().is_empty());
}

#[test]
fn unlock_by_a_non_holder_is_refused() {
    let l = LocalLocker::new();
    block_on(async {
        assert!(l.lock(&args("w", &["x"])).await.unwrap());
        assert!(!l.unlock(&args("other", &["x"])).await.unwrap());
        // A writer's uid cannot release through runlock, nor a reader through unlock.
        assert!(!l.runlock(&args("w", &["x"])).await.unwrap());
        assert!(l.unlock(&args("w", &["x"])).await.unwrap());
        assert!(
            !l.unlock(&args("w", &["x"])).await.unwrap(),
            "second unlock must be a no-op"
        );
        assert!(l.rlock(&args("r", &["x"])).await.unwrap());
        assert!(!l.unlock(&args("r", &["x"])).await.unwrap());
        assert!(!l.runlock(&args("nobody", &["x"])).await.unwrap());
    });
    assert_eq!(entries(&l), [("x".into(), "r".into(), LockMode::Read)]);
}

#[test]
fn multi_resource_locks_are_all_or_nothing() {
    let l = LocalLocker::new();
    // Enough names that they land on several shards.
    let many: Vec<String> = (0..50).map(|i| format!("res-{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    block_on(async {
        assert!(l.lock(&args("holder", &["res-17"])).await.unwrap());
        assert!(!l.lock(&args("w", &many)).await.unwrap());
        assert!(!l.rlock(&args("r", &many)).await.unwrap());
        assert_eq!(
            l.snapshot().len(),
            1,
            "a refused multi-lock must grant nothing"
        );
        assert!(l.unlock(&args("holder", &["res-17"])).await.unwrap());
        assert!(l.rlock(&args("r", &many)).await.unwrap());
        assert_eq!(l.snapshot().len(), 50);
        assert!(!l.lock(&args("w", &["res-3", "elsewhere"])).await.unwrap());
        assert!(l.runlock(&args("r", &many)).await.unwrap());
    });
    assert!(l.snapshot().is_empty());
}

#[test]
fn refresh_knows_only_held_uids() {
    let l = LocalLocker::new();
    block_on(async {
        assert!(l.lock(&args("w", &["a", "b"])).await.unwrap());
        assert!(l.refresh(&args("w", &["a", "b"])).await.unwrap());
        assert!(!l.refresh(&args("stranger", &["a"])).await.unwrap());
        assert!(
            !l.refresh(&args("w", &["a", "c"])).await.unwrap(),
            "partly held is not held"
        );
    });
}

#[test]
fn force_unlock_by_uid_or_by_resource() {
    let l = LocalLocker::new();
    block_on(async {
        assert!(l.rlock(&args("r1", &["a", "b"])).await.unwrap());
        assert!(l.rlock(&args("r2", &["a"])).await.unwrap());
        assert!(l.lock(&args("w", &["c"])).await.unwrap());
        // By uid, everywhere it holds something.
        assert!(l.force_unlock(&args("r1", &[])).await.unwrap());
        assert_eq!(
            entries(&l),
            [
                ("a".into(), "r2".into(), LockMode::Read),
                ("c".into(), "w".into(), LockMode::Write)
            ]
        );
        // By resource, whoever holds it.
        assert!(l.force_unlock(&args("", &["a", "c"])).await.unwrap());
        assert!(l.snapshot().is_empty());
        assert!(!l.force_unlock(&args("", &["a"])).await.unwrap());
    });
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let l = LocalLocker::new();
    let long = "x".repeat(crate::MAX_RESOURCE_NAME_LEN + 1);
    let too_many: Vec<String> = (0..=crate::MAX_RESOURCES).map(|i| i.to_string()).collect();
    let too_many: Vec<&str> = too_many.iter().map(String::as_str).collect();
    block_on(async {
        for bad in [
            args("u", &[]),
            args("u", &[""]),
            args("u", &[&long]),
            args("u", &too_many),
            args("", &["a"]),
        ] {
            assert!(
                matches!(l.lock(&bad).await, Err(Error::InvalidArgument(_))),
                "{bad:?}"
            );
            assert!(matches!(
                l.runlock(&bad).await,
                Err(Error::InvalidArgument(_))
            ));
            assert!(matches!(
                l.refresh(&bad).await,
                Err(Error::InvalidArgument(_))
            ));
        }
        assert!(matches!(
            l.force_unlock(&args("", &[])).await,
            Err(Error::InvalidArgument(_))
        ));
    });
    assert!(l.snapshot().is_empty());
}

#[test]
fn duplicate_names_in_hand_built_args_do_not_duplicate_entries() {
    let l = LocalLocker::new();
    block_on(async {
        assert!(l.rlock(&args("r", &["a", "a"])).await.unwrap());
        assert_eq!(l.snapshot().len(), 1);
        assert!(l.runlock(&args("r", &["a", "a"])).await.unwrap());
    });
    assert!(l.snapshot().is_empty());
}

#[test]
fn concurrent_writers_on_threads_never_share() {
    // Hammer one resource from several threads; every grant must be exclusive.
    let l = Arc::new(LocalLocker::new());
    let holders = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (l, holders) = (l.clone(), holders.clone());
            std::thread::spawn(move || {
                let mut wins = 0;
                for i in 0..2000 {
                    let a = args(&format!("{t}-{i}"), &["hot", "warm"]);
                    if block_on(l.lock(&a)).unwrap() {
                        let inside = holders.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        assert_eq!(inside, 0, "two writers inside at once");
                        holders.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                        assert!(block_on(l.unlock(&a)).unwrap());
                        wins += 1;
                    }
                }
                wins
            })
        })
        .collect();
    let wins: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(wins > 0);
    assert!(l.snapshot().is_empty());
}

fn locker_with(validity_secs: u64, quarantine_secs: u64) -> LocalLocker {
    let config = crate::LockerConfig {
        validity: std::time::Duration::from_secs(validity_secs),
        quarantine: std::time::Duration::from_secs(quarantine_secs),
    };
    LocalLocker::with_config("test", config)
}

#[tokio::test(start_paused = true)]
async fn unrefreshed_entries_expire_after_the_validity() {
    use std::time::Duration;
    let l = locker_with(60, 60);
    assert!(l.lock(&args("old", &["a"])).await.unwrap());
    assert!(l.rlock(&args("r", &["b"])).await.unwrap());
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(l.refresh(&args("r", &["b"])).await.unwrap());
    assert!(
        !l.lock(&args("new", &["a"])).await.unwrap(),
        "still valid at 30 s"
    );
    tokio::time::sleep(Duration::from_secs(30)).await;
    // 60 s after the grant "old" is gone; "r" was refreshed at 30 s and lives on.
    assert!(
        l.lock(&args("new", &["a"])).await.unwrap(),
        "expired at 60 s"
    );
    assert_eq!(
        entries(&l),
        [
            ("a".into(), "new".into(), LockMode::Write),
            ("b".into(), "r".into(), LockMode::Read)
        ]
    );
    assert!(
        !l.refresh(&args("old", &["a"])).await.unwrap(),
        "an expired uid is unknown"
    );
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(entries(&l), [("a".into(), "new".into(), LockMode::Write)]);
}

#[tokio::test(start_paused = true)]
async fn untouched_names_are_swept() {
    use std::time::Duration;
    let l = locker_with(10, 10);
    for i in 0..500 {
        assert!(l
            .lock(&args(&format!("u{i}"), &[&format!("name-{i}")]))
            .await
            .unwrap());
    }
    tokio::time::sleep(Duration::from_secs(11)).await;
    // Any call on another name triggers the periodic full pass.
    assert!(l.lock(&args("x", &["elsewhere"])).await.unwrap());
    let left: usize = {
        let mut n = 0;
        l.shards.for_each(|_, h| n += h.entries().len());
        n
    };
    assert_eq!(left, 1, "expired entries must be swept, not just hidden");
}

/// Expiry follows each entry's own last refresh, whatever the order of
/// grants, refreshes, releases and re-grants on names that share shards.
#[tokio::test(start_paused = true)]
async fn expiry_follows_each_entry_own_last_refresh() {
    use std::collections::BTreeSet;
    use std::time::Duration;
    let l = locker_with(60, 0);
    let name = |i: usize| format!("n{i}");
    // Granted 10 ms apart: entry i at i * 10 ms, over two seconds.
    for i in 0..200 {
        assert!(l.lock(&args(&format!("u{i}"), &[&name(i)])).await.unwrap());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for i in (0..200).step_by(3) {
        assert!(l
            .unlock(&args(&format!("u{i}"), &[&name(i)]))
            .await
            .unwrap());
    }
    tokio::time::sleep(Duration::from_secs(28)).await;
    // At 30 s: refresh every fifth, and grant the released names again.
    for i in (0..200).step_by(5) {
        let held = i % 3 != 0;
        assert_eq!(
            l.refresh(&args(&format!("u{i}"), &[&name(i)]))
                .await
                .unwrap(),
            held
        );
    }
    for i in (0..200).step_by(3) {
        assert!(l.lock(&args(&format!("v{i}"), &[&name(i)])).await.unwrap());
    }
    tokio::time::sleep(Duration::from_secs(31)).await;
    // At 61 s the unrefreshed grants of the first second are gone.
    let live: BTreeSet<String> = l.snapshot().into_iter().map(|e| e.uid).collect();
    let expected: BTreeSet<String> = (0..200)
        .map(|i| match i {
            i if i % 3 == 0 => format!("v{i}"),
            i if i % 5 == 0 || i > 100 => format!("u{i}"),
            _ => String::new(),
        })
        .filter(|uid| !uid.is_empty())
        .collect();
    assert_eq!(live, expected);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(l.snapshot().is_empty(), "everything expired by 91 s");
}

#[tokio::test(start_paused = true)]
async fn restart_forgets_and_quarantines() {
    use std::time::Duration;
    let l = locker_with(60, 60);
    assert!(l.lock(&args("w", &["a"])).await.unwrap());
    l.restart();
    assert!(l.snapshot().is_empty());
    assert!(l.is_quarantined());
    assert!(matches!(
        l.lock(&args("new", &["b"])).await,
        Err(Error::LockerUnavailable { .. })
    ));
    assert!(matches!(
        l.rlock(&args("new", &["b"])).await,
        Err(Error::LockerUnavailable { .. })
    ));
    // A holder's refresh re-creates its entry (the node cannot know it
    // held it) but answers the quarantine: nothing counts until it ends.
    assert!(l
        .refresh_mode(&args("w", &["a"]), LockMode::Write)
        .await
        .is_err_and(|e| e.is_quarantine()));
    assert_eq!(entries(&l), [("a".into(), "w".into(), LockMode::Write)]);
    // Never over a conflicting entry.
    for (uid, mode) in [("other", LockMode::Write), ("reader", LockMode::Read)] {
        assert!(l
            .refresh_mode(&args(uid, &["a"]), mode)
            .await
            .is_err_and(|e| e.is_quarantine()));
    }
    assert_eq!(entries(&l), [("a".into(), "w".into(), LockMode::Write)]);
    // A plain refresh does not know the mode and does not re-grant.
    assert!(l.refresh(&args("r", &["c"])).await.is_err());
    // Waiting, and drawing a token, answer the quarantine too, even for
    // the uid whose entry is back.
    let wait = crate::WaitArgs {
        ticket: crate::Ticket::now(),
        place_ttl: Duration::from_secs(3),
        wake: None,
    };
    assert!(l
        .lock_wait(&args("w", &["a"]), LockMode::Write, &wait)
        .await
        .is_err_and(|e| e.is_quarantine()));
    assert!(l
        .fence(&args("w", &["a"]), LockMode::Write, 0)
        .await
        .is_err_and(|e| e.is_quarantine()));
    // Refreshes in the quarantine keep the re-created entry alive.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(l
        .refresh_mode(&args("w", &["a"]), LockMode::Write)
        .await
        .is_err());
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(!l.is_quarantined());
    assert!(l.lock(&args("new", &["b"])).await.unwrap());
    // The re-created entry counts now.
    assert!(l
        .refresh_mode(&args("w", &["a"]), LockMode::Write)
        .await
        .unwrap());
    // Out of quarantine, an unknown uid is "not found", never re-granted.
    assert!(!l
        .refresh_mode(&args("late", &["d"]), LockMode::Write)
        .await
        .unwrap());
    assert!(l.snapshot().iter().all(|i| i.resource != "d"));
}

#[tokio::test(start_paused = true)]
async fn regrant_after_restart_is_all_or_nothing() {
    let l = locker_with(60, 60);
    l.restart();
    // "b" is taken by someone else who refreshed first.
    assert!(l
        .refresh_mode(&args("other", &["b"]), LockMode::Write)
        .await
        .is_err_and(|e| e.is_quarantine()));
    assert!(l
        .refresh_mode(&args("w", &["a", "b"]), LockMode::Write)
        .await
        .is_err_and(|e| e.is_quarantine()));
    assert_eq!(entries(&l), [("b".into(), "other".into(), LockMode::Write)]);
}

// ---------------------------------------------------------------------------
// Queues, pushes, wounds and fencing tokens (issue #10).
// ---------------------------------------------------------------------------

mod queues {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::{args, entries, locker_with};
    use crate::{
        LocalLocker, LockMode, NetLocker, PushEvent, PushSink, Ticket, WaitArgs, WaitReply, Wake,
    };

    /// Records every push, in the order the locker made them.
    #[derive(Default)]
    struct Log(Mutex<Vec<(String, PushEvent)>>);

    impl PushSink for Log {
        fn push(&self, _slot: usize, uid: &str, event: PushEvent) {
            self.0.lock().unwrap().push((uid.to_owned(), event));
        }
    }

    impl Log {
        /// Takes the pushes made so far.
        fn take(&self) -> Vec<(String, PushEvent)> {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
    }

    fn granted(uid: &str) -> (String, PushEvent) {
        (uid.to_owned(), PushEvent::Granted)
    }

    fn wounded(uid: &str) -> (String, PushEvent) {
        (uid.to_owned(), PushEvent::Wounded)
    }

    /// A ticket drawn at `at` (smaller is older).
    fn ticket(at: u64) -> Ticket {
        Ticket { at, tiebreak: 0 }
    }

    const TTL: Duration = Duration::from_secs(3);

    fn wait_args(at: u64, log: &Arc<Log>) -> WaitArgs {
        WaitArgs {
            ticket: ticket(at),
            place_ttl: TTL,
            wake: Some(Wake::new(log.clone(), 0)),
        }
    }

    fn reservation(at: u64) -> WaitArgs {
        WaitArgs {
            ticket: ticket(at),
            place_ttl: TTL,
            wake: None,
        }
    }

    async fn wait(
        l: &LocalLocker,
        uid: &str,
        names: &[&str],
        mode: LockMode,
        wait: &WaitArgs,
    ) -> WaitReply {
        l.lock_wait(&args(uid, names), mode, wait).await.unwrap()
    }

    /// `expire_due`, which a lock server's timer calls, frees a dead
    /// holder's entry at its deadline and pushes the waiter behind it,
    /// without any call on that name; it reports when to run again.
    #[tokio::test(start_paused = true)]
    async fn expire_due_grants_the_waiter_of_an_entry_at_its_deadline() {
        let l = locker_with(10, 0);
        let log = Arc::new(Log::default());
        assert!(l.lock(&args("dead", &["x"])).await.unwrap());
        let due = l.expire_due().expect("an entry expires some time");
        assert_eq!(due, tokio::time::Instant::now() + Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(5)).await;
        let long = WaitArgs {
            place_ttl: Duration::from_secs(30),
            ..wait_args(1, &log)
        };
        assert_eq!(
            wait(&l, "w", &["x"], LockMode::Write, &long).await,
            WaitReply::Queued
        );
        tokio::time::advance(Duration::from_secs(5) - Duration::from_millis(1)).await;
        assert_eq!(l.expire_due(), Some(due), "not due yet");
        assert!(log.take().is_empty());
        tokio::time::advance(Duration::from_millis(1)).await;
        let next = l.expire_due();
        assert_eq!(log.take(), vec![granted("w")]);
        assert_eq!(holders(&l, "x"), ["w"]);
        assert_eq!(
            next,
            Some(tokio::time::Instant::now() + Duration::from_secs(10))
        );
    }

    /// Uids holding `name`, sorted.
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

    #[tokio::test(start_paused = true)]
    async fn waiters_are_granted_in_ticket_order_not_arrival_order() {
        let l = LocalLocker::new();
        let log = Arc::new(Log::default());
        assert!(l.lock(&args("h", &["x"])).await.unwrap());
        // The younger waiter reaches this locker first.
        let young = wait(&l, "young", &["x"], LockMode::Write, &wait_args(20, &log)).await;
        let old = wait(&l, "old", &["x"], LockMode::Write, &wait_args(10, &log)).await;
        assert_eq!((young, old), (WaitReply::Queued, WaitReply::Queued));
        assert_eq!(l.waiting(), 2);
        assert!(l.unlock(&args("h", &["x"])).await.unwrap());
        assert_eq!(log.take(), [granted("old")], "the older ticket goes first");
        assert_eq!(holders(&l, "x"), ["old"]);
        assert!(l.unlock(&args("old", &["x"])).await.unwrap());
        assert_eq!(log.take(), [granted("young")]);
        assert_eq!(holders(&l, "x"), ["young"]);
        assert_eq!(l.waiting(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn readers_at_the_head_are_granted_together_up_to_the_first_writer() {
        let l = LocalLocker::new();
        let log = Arc::new(Log::default());
        assert!(l.lock(&args("h", &["x"])).await.unwrap());
        for (uid, at, mode) in [
            ("r1", 1, LockMode::Read),
            ("r2", 2, LockMode::Read),
            ("w", 3, LockMode::Write),
            ("r3", 4, LockMode::Read),
        ] {
            let reply = wait(&l, uid, &["x"], mode, &wait_args(at, &log)).await;
            assert_eq!(reply, WaitReply::Queued, "{uid}");
        }
        assert!(l.unlock(&args("h", &["x"])).await.unwrap());
        let mut pushed = log.take();
        pushed.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(pushed, [granted("r1"), granted("r2")]);
        assert_eq!(holders(&l, "x"), ["r1", "r2"]);
        // r3 is a reader too, but it queued behind a writer.
        assert!(l.runlock(&args("r1", &["x"])).await.unwrap());
        assert!(log.take().is_empty(), "r2 still reads: the writer waits");
        assert!(l.runlock(&args("r2", &["x"])).await.unwrap());
        assert_eq!(log.take(), [granted("w")]);
        assert!(l.unlock(&args("w", &["x"])).await.unwrap());
        assert_eq!(log.take(), [granted("r3")]);
        assert_eq!(l.waiting(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_does_not_overtake_a_queued_writer_even_while_readers_hold() {
        let l = LocalLocker::new();
        let log = Arc::new(Log::default());
        assert!(l.rlock(&args("r0", &["x"])).await.unwrap());
        let w = wait(&l, "w", &["x"], LockMode::Write, &wait_args(1, &log)).await;
        let r = wait(&l, "r", &["x"], LockMode::Read, &wait_args(2, &log)).await;
        assert_eq!((w, r), (WaitReply::Queued, WaitReply::Queued));
        assert_eq!(holders(&l, "x"), ["r0"]);
        // An older reader is not held up by the writer behind it.
        let older = wait(&l, "older", &["x"], LockMode::Read, &wait_args(0, &log)).await;
        assert_eq!(older, WaitReply::Granted);
        assert!(l.runlock(&args("r0", &["x"])).await.unwrap());
        assert!(l.runlock(&args("older", &["x"])).await.unwrap());
        assert_eq!(log.take(), [granted("w")]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_plain_lock_is_refused_while_a_conflicting_waiter_is_queued() {
        let l = LocalLocker::new();
        let log = Arc::new(Log::default());
        assert!(l.rlock(&args("r0", &["x"])).await.unwrap());
        // Readers share with r0, and nobody waits yet.
        assert!(l.rlock(&args("r1", &["x"])).await.unwrap());
        let w = wait(&l, "w", &["x"], LockMode::Write, &wait_args(1, &log)).await;
        assert_eq!(w, WaitReply::Queued);
        assert!(
            !l.rlock(&args("r2", &["x"])).await.unwrap(),
            "a plain reader must not overtake the queued writer"
        );
        assert!(!l.lock(&args("w2", &["x"])).await.unwrap());
        assert!(
            !l.lock(&args("w3", &["x", "y"])).await.unwrap(),
            "all or nothing"
        );
        // Other names are not affected.
        assert!(l.lock(&args("w4", &["y"])).await.unwrap());
        // Once the writer leaves the line, plain readers are admitted again.
        assert!(
            !l.unlock(&args("w", &["x"])).await.unwrap(),
            "w held nothing"
        );
        assert_eq!(l.waiting(), 0);
        assert!(l.rlock(&args("r2", &["x"])).await.unwrap());
        assert!(log.take().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_place_does_not_stop_plain_readers() {
        let l = LocalLocker::new();
        let log = Arc::new(Log::default());
        assert!(l.lock(&args("h", &["x"])).await.unwrap());
        assert_eq!(
            wait(&l, "r", &["x"], LockMode::Read, &wait_args(1, &log)).await,
            WaitReply::Queued
        );
        assert!(l.unlock(&args("h", &["x"])).await.unwrap());
        assert_eq!(log.take(), [granted("r")]);
        assert!(l.rlock(&args("r2", &["x"])).await.unwrap());
        assert_eq!(holders(&l, "x"), ["r", "r2"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reservation_is_never_granted_by_promotion() {
        let l = LocalLocker::new();
        let log = Arc::new(Log::default());
        assert!(l.lock(&args("h", &["x"])).await.unwrap());
        let reply = wait(&l, "res", &["x"], LockMode::Write, &reservation(1)).await;
        assert_eq!(reply, WaitReply::Refused, "nothing can be pushed to it");
        assert_eq!(l.waiting(), 1, "but its place is kept");
        let r = wait(&l, "r", &["x"], LockMode::Read, &wait_args(2, &log)).await;
        assert_eq!(r, WaitReply::Queued);
        assert!(l.unlock(&args("h", &["x"])).await.unwrap());
        assert!(l.snapshot().is_empty(), "the reservation is not granted");
        assert!(log.take().is_empty(), "nor the reader behind it");
        assert!(
            !l.lock(&args("plain", &["x"])).await.unwrap(),
            "the reservation keeps its turn"
        );
        // Its waiter asks again and gets it; the reader follows after it.
        let again = wait(&l, "res", &["x"], LockMode::Write, &reservation(1)).await;
        assert_eq!(again, WaitReply::Granted);
        assert_eq!(holders(&l, "x"), ["res"]);
        assert!(l.unlock(&args("res", &["x"])).await.unwrap());
        assert_eq!(log.take(), [granted("r")]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_place_expires_after_its_ttl_unless_renewed() {
        let l = LocalLocker::new();
        let log = Arc::new(Log::default());
        assert!(l.lock(&args("h", &["x"])).await.unwrap());
        let w = wait(&l, "w", &["x"], LockMode::Write, &wait_args(1, &log)).await;
        assert_eq!(w, WaitReply::Queued);
        tokio::time::sleep(TTL - Duration::from_secs(1)).await;
        // Renewed at 2 s: now good until 5 s.
        let w = wait(&l, "w", &["x"], LockMode::Write, &wait_args(1, &log)).await;
        assert_eq!(w, WaitReply::Queued);
        tokio::time::sleep(Duration::from_secs(2)).await;
        l.snapshot();
        assert_eq!(l.waiting(), 1, "renewed at 2 s, alive at 4 s");
        tokio::time::sleep(Duration::from_millis(1001)).await;
        l.snapshot();
        assert_eq!(l.waiting(), 0, "not renewed for the TTL: dropped");
        assert!(l.unlock(&args("h", &["x"])).await.unwrap());
        assert!(log.take().is_empty(), "an expired place is never granted");
        assert!(l.lock(&args("plain", &["x"])).await.unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_place_stops_blocking_even_before_it_is_swept() {
        let l = LocalLocker::new();
        let log = Arc::new(Log::default());
        assert!(l.rlock(&args("r0", &["x"])).await.unwrap());
        let w = wait(&l, "w", &["x"], LockMode::Write, &wait_args(1, &log)).await;
        assert_eq!(w, WaitReply::Queued);
        assert!(!l.rlock(&args("r1", &["x"])).await.unwrap());
        tokio::time::sleep(TTL).await;
        assert!(
            l.rlock(&args("r1", &["x"])).await.unwrap(),
            "the writer stopped asking {TTL:?} ago"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_place_never_outlives_the_validity() {
        let l = locker_with(10, 10);
        let log = Arc::new(Log::default());
        assert!(l.lock(&args("h", &["x"])).await.unwrap());
        let long = WaitArgs {
            place_ttl: Duration::from_secs(1000),
            ..wait_args(1, &log)
        };
        assert_eq!(
            wait(&l, "w", &["x"], LockMode::Write, &long).await,
            WaitReply::Queued
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(l.refresh(&args("h", &["x"])).await.unwrap());
        tokio::time::sleep(Duration::from_secs(5)).await;
        l.snapshot();
        assert_eq!(l.waiting(), 0, "capped at the 10 s validity");
        assert_eq!(holders(&l, "x"), ["h"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_uid_with_the_same_ticket_replaces_the_place() {
        let l = LocalLocker::new();
        let log = Arc::new(Log::default());
        assert!(l.lock(&args("h", &["x"])).await.unwrap());
        for uid in ["try-1", "try-2"] {
            let reply = wait(&l, uid, &["x"], LockMode::Write, &wait_args(7, &log)).await;
            assert_eq!(reply, WaitReply::Queued);
        }
        assert_eq!(l.waiting(), 1, "one waiter, one place");
        assert!(l.unlock(&args("h", &["x"])).await.unwrap());
        assert_eq!(log.take(), [granted("try-2")]);
    }

    /// The same waiter asking again under a new uid for other names (a
    /// client may): the places of its old request go from every name they
    /// stood on, not only from the names the two requests share, and a
    /// later locker of an old name is not held in line behind them. For a
    /// reservation and for a pushed place alike.
    #[tokio::test(start_paused = true)]
    async fn a_new_uid_with_the_same_ticket_on_other_names_leaves_no_place_behind() {
        let log = Arc::new(Log::default());
        for (at, asked) in [(7, reservation(7)), (8, wait_args(8, &log))] {
            let l = LocalLocker::new();
            let expect = match asked.wake {
                Some(_) => WaitReply::Queued,
                None => WaitReply::Refused,
            };
            assert!(l.lock(&args("h", &["held"])).await.unwrap());
            let old = ["held", "a1", "a2", "a3"];
            assert_eq!(
                wait(&l, "try-1", &old, LockMode::Write, &asked).await,
                expect
            );
            assert_eq!(l.waiting(), 4);
            let new = ["held", "b1", "b2"];
            assert_eq!(
                wait(&l, "try-2", &new, LockMode::Write, &asked).await,
                expect
            );
            assert_eq!(l.waiting(), 3, "ticket {at}: only the new request's places");
            // A plain lock and a younger waiter on old names go straight in.
            assert!(
                l.lock(&args("plain", &["a1"])).await.unwrap(),
                "ticket {at}: a1 has no place of try-1 left"
            );
            assert_eq!(
                wait(
                    &l,
                    "young",
                    &["a2", "a3"],
                    LockMode::Write,
                    &wait_args(50, &log)
                )
                .await,
                WaitReply::Granted,
                "ticket {at}"
            );
            // The new request's places stand.
            assert!(!l.lock(&args("plain-b", &["b2"])).await.unwrap());
        }
        assert!(log.take().is_empty(), "nothing was granted by push");
    }

    /// As above when the new uid is granted at once: the old request's
    /// places on the names the grant does not cover go too. And a uid that
    /// asks again under a new ticket for other names keeps no place on the
    /// names it no longer asks for.
    #[tokio::test(start_paused = true)]
    async fn a_superseded_request_leaves_no_place_when_its_waiter_is_granted_or_moves() {
        let l = LocalLocker::new();
        assert!(l.lock(&args("h", &["held"])).await.unwrap());
        assert_eq!(
            wait(
                &l,
                "try-1",
                &["held", "a1"],
                LockMode::Write,
                &reservation(7)
            )
            .await,
            WaitReply::Refused
        );
        assert!(l.unlock(&args("h", &["held"])).await.unwrap());
        assert_eq!(
            wait(
                &l,
                "try-2",
                &["held", "b1"],
                LockMode::Write,
                &reservation(7)
            )
            .await,
            WaitReply::Granted
        );
        assert_eq!(l.waiting(), 0);
        assert!(l.lock(&args("plain", &["a1"])).await.unwrap());

        assert!(l.lock(&args("h2", &["held-2"])).await.unwrap());
        assert_eq!(
            wait(
                &l,
                "same",
                &["held-2", "c1"],
                LockMode::Write,
                &reservation(9)
            )
            .await,
            WaitReply::Refused
        );
        assert_eq!(
            wait(
                &l,
                "same",
                &["held-2", "d1"],
                LockMode::Write,
                &reservation(10)
            )
            .await,
            WaitReply::Refused
        );
        assert_eq!(l.waiting(), 2, "held-2 and d1");
        assert!(l.lock(&args("plain", &["c1"])).await.unwrap());
        assert!(!l.lock(&args("plain", &["d1"])).await.unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn wounds_are_pushed_to_younger_partial_holders_only() {
        let l = LocalLocker::new();
        let log = Arc::new(Log::default());
        // A plain holder has no ticket and is never wounded.
        assert!(l.lock(&args("plain", &["p"])).await.unwrap());
        let w = wait(&l, "w-old", &["p"], LockMode::Write, &wait_args(1, &log)).await;
        assert_eq!(w, WaitReply::Queued);
        assert!(log.take().is_empty());

        // "mid" got x by waiting in line.
        let mid = wait(&l, "mid", &["x"], LockMode::Write, &wait_args(50, &log)).await;
        assert_eq!(mid, WaitReply::Granted);
        // A younger waiter queues behind it without wounding it.
        let young = wait(&l, "young", &["x"], LockMode::Write, &wait_args(60, &log)).await;
        assert_eq!(young, WaitReply::Queued);
        assert!(log.take().is_empty(), "a younger waiter wounds nobody");
        // An older one wounds it.
        let old = wait(&l, "old", &["x"], LockMode::Write, &wait_args(40, &log)).await;
        assert_eq!(old, WaitReply::Queued);
        assert_eq!(log.take(), [wounded("mid")]);
        // Asking again while wounded repeats the wound (it may have been lost).
        let again = wait(&l, "mid", &["x"], LockMode::Write, &wait_args(50, &log)).await;
        assert_eq!(again, WaitReply::Granted);
        assert_eq!(log.take(), [wounded("mid")]);
        // The wounded one gives x back: the older waiter is next.
        assert!(l.unlock(&args("mid", &["x"])).await.unwrap());
        assert_eq!(log.take(), [granted("old")]);
    }

    #[tokio::test(start_paused = true)]
    async fn readers_are_not_wounded_by_older_readers() {
        let l = LocalLocker::new();
        let log = Arc::new(Log::default());
        let r = wait(&l, "r-young", &["x"], LockMode::Read, &wait_args(50, &log)).await;
        assert_eq!(r, WaitReply::Granted);
        let older = wait(&l, "r-old", &["x"], LockMode::Read, &wait_args(10, &log)).await;
        assert_eq!(older, WaitReply::Granted, "readers share");
        assert!(log.take().is_empty());
        // An older writer wounds both younger readers, not the older one.
        let w = wait(&l, "w", &["x"], LockMode::Write, &wait_args(20, &log)).await;
        assert_eq!(w, WaitReply::Queued);
        assert_eq!(log.take(), [wounded("r-young")]);
    }

    #[tokio::test(start_paused = true)]
    async fn leave_queue_drops_the_place_and_keeps_the_grant() {
        let l = LocalLocker::new();
        let log = Arc::new(Log::default());
        assert!(l.rlock(&args("r0", &["x"])).await.unwrap());
        let w = wait(&l, "w", &["x"], LockMode::Write, &wait_args(1, &log)).await;
        let r = wait(&l, "r", &["x"], LockMode::Read, &wait_args(2, &log)).await;
        assert_eq!((w, r), (WaitReply::Queued, WaitReply::Queued));
        // The writer's connection closed: the reader behind it is let in.
        assert!(l.leave_queue(&args("w", &["x"])).unwrap());
        assert!(!l.leave_queue(&args("w", &["x"])).unwrap(), "already gone");
        assert_eq!(log.take(), [granted("r")]);
        assert_eq!(holders(&l, "x"), ["r", "r0"]);
        // A grant is not a place: leave_queue keeps it.
        assert!(!l.leave_queue(&args("r", &["x"])).unwrap());
        assert_eq!(holders(&l, "x"), ["r", "r0"]);
        assert_eq!(l.waiting(), 0);
        assert!(l.unlock(&args("r0", &["x"])).await.is_ok());
        assert!(log.take().is_empty(), "nobody to promote any more");
    }

    #[tokio::test(start_paused = true)]
    async fn a_spanning_waiter_is_granted_all_or_nothing() {
        let l = LocalLocker::new();
        let log = Arc::new(Log::default());
        assert!(l.lock(&args("ha", &["a"])).await.unwrap());
        assert!(l.lock(&args("hb", &["b"])).await.unwrap());
        let w = wait(&l, "w", &["a", "b"], LockMode::Write, &wait_args(1, &log)).await;
        assert_eq!(w, WaitReply::Queued);
        let xa = wait(&l, "xa", &["a"], LockMode::Write, &wait_args(2, &log)).await;
        assert_eq!(xa, WaitReply::Queued);
        assert!(l.unlock(&args("ha", &["a"])).await.unwrap());
        assert!(log.take().is_empty(), "b is still held, and xa is behind w");
        assert!(holders(&l, "a").is_empty(), "no partial grant");
        assert!(l.unlock(&args("hb", &["b"])).await.unwrap());
        assert_eq!(log.take(), [granted("w")]);
        assert_eq!(
            entries(&l),
            [
                ("a".into(), "w".into(), LockMode::Write),
                ("b".into(), "w".into(), LockMode::Write)
            ]
        );
        assert!(l.unlock(&args("w", &["a", "b"])).await.unwrap());
        assert_eq!(log.take(), [granted("xa")]);
    }

    #[tokio::test(start_paused = true)]
    async fn fence_requires_holding_and_increases() {
        let l = LocalLocker::new();
        let w = args("w", &["x"]);
        assert_eq!(l.fence(&w, LockMode::Write, 0).await.unwrap(), None);
        assert!(l.lock(&w).await.unwrap());
        assert_eq!(
            l.fence(&w, LockMode::Read, 0).await.unwrap(),
            None,
            "held in the other mode"
        );
        assert_eq!(
            l.fence(&args("w", &["x", "y"]), LockMode::Write, 0)
                .await
                .unwrap(),
            None,
            "y is not held"
        );
        let t1 = l.fence(&w, LockMode::Write, 0).await.unwrap().unwrap();
        let t2 = l.fence(&w, LockMode::Write, 0).await.unwrap().unwrap();
        assert!(t2 > t1, "{t2} > {t1}");
        let t3 = l
            .fence(&w, LockMode::Write, t2 + 1000)
            .await
            .unwrap()
            .unwrap();
        assert!(t3 >= t2 + 1000, "the floor is honoured: {t3}");
        assert!(l.unlock(&w).await.unwrap());
        assert_eq!(l.fence(&w, LockMode::Write, 0).await.unwrap(), None);

        // Readers draw increasing tokens too; and a lock over x and a
        // fresh name gets one above x's.
        assert!(l.rlock(&args("r", &["x"])).await.unwrap());
        let t4 = l
            .fence(&args("r", &["x"]), LockMode::Read, 0)
            .await
            .unwrap()
            .unwrap();
        assert!(t4 > t3, "{t4} > {t3}: the name was freed and re-created");
        assert!(l.runlock(&args("r", &["x"])).await.unwrap());
        let both = args("m", &["x", "fresh"]);
        assert!(l.lock(&both).await.unwrap());
        let t5 = l.fence(&both, LockMode::Write, 0).await.unwrap().unwrap();
        assert!(t5 > t4);
        assert!(l.unlock(&both).await.unwrap());
        let fresh = args("f", &["fresh"]);
        assert!(l.lock(&fresh).await.unwrap());
        let t6 = l.fence(&fresh, LockMode::Write, 0).await.unwrap().unwrap();
        assert!(t6 > t5, "fresh's latest token was {t5}, got {t6}");
    }

    fn wall_clock_nanos() -> u64 {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        u64::try_from(since.as_nanos()).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_restart_tokens_start_from_the_clock() {
        let l = locker_with(60, 60);
        let w = args("w", &["x"]);
        assert!(l.lock(&w).await.unwrap());
        let before = l.fence(&w, LockMode::Write, 0).await.unwrap().unwrap();
        l.restart();
        // The holder's refresh re-creates its entry during the quarantine,
        // where no token is drawn.
        assert!(l.refresh_mode(&w, LockMode::Write).await.is_err());
        assert!(l.fence(&w, LockMode::Write, 0).await.is_err());
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(l.refresh_mode(&w, LockMode::Write).await.is_err());
        tokio::time::sleep(Duration::from_secs(30)).await;
        let wall = wall_clock_nanos();
        let after = l.fence(&w, LockMode::Write, 0).await.unwrap().unwrap();
        let quarantine = u64::try_from(Duration::from_secs(60).as_nanos()).unwrap();
        // The locker's clock follows tokio's paused one.
        assert!(
            after >= wall + quarantine - 1_000_000_000 && after > before,
            "tokens restart from the clock: {after} after {before}, wall {wall}"
        );

        // The same for a name nobody holds across the restart.
        let y = args("y1", &["y"]);
        assert!(l.lock(&y).await.unwrap());
        let ty = l.fence(&y, LockMode::Write, 0).await.unwrap().unwrap();
        assert!(ty > before + quarantine - 1_000_000_000, "{ty}");
    }

    /// A waiter's re-sent request renews a grant it already has: the
    /// coordinator counts the `Granted` answer as a refresh from the send on
    /// (`NetLocker::queues`). Found by these tests as a bug (the entry still
    /// expired `validity` after the first grant), fixed in 0d8aadb.
    #[tokio::test(start_paused = true)]
    async fn a_granted_waiter_asking_again_renews_its_entry() {
        let l = locker_with(60, 60);
        let log = Arc::new(Log::default());
        let w = wait(&l, "w", &["x"], LockMode::Write, &wait_args(1, &log)).await;
        assert_eq!(w, WaitReply::Granted);
        tokio::time::sleep(Duration::from_secs(50)).await;
        let again = wait(&l, "w", &["x"], LockMode::Write, &wait_args(1, &log)).await;
        assert_eq!(again, WaitReply::Granted);
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert_eq!(
            holders(&l, "x"),
            ["w"],
            "re-sent at 50 s, the entry must live until 110 s, yet it expired at 60 s"
        );
        assert!(l.queues(), "and the locker promises it");
        tokio::time::sleep(Duration::from_secs(40)).await;
        assert!(holders(&l, "x").is_empty(), "expired at 110 s");
    }
}

/// A resource's map key outlives the request that created it. Keyed by a
/// position in that request's list of names, it would keep the whole list
/// alive (up to 1000 names of 1 KiB) while anyone else holds the one name,
/// long after the request's own accounting on a server was dropped.
#[test]
fn a_released_request_leaves_none_of_its_names_behind_in_the_table() {
    let locker = LocalLocker::new();
    let names: Vec<String> = (0..1000)
        .map(|i| format!("{i:04}{}", "p".repeat(1000)))
        .collect();
    let mut big = args("a", &[]);
    big.resources = names.into();
    let first = big.resources[0].clone();
    block_on(async {
        assert!(locker.rlock(&big).await.unwrap());
        assert!(locker.rlock(&args("b", &[&first])).await.unwrap());
        assert!(locker.runlock(&big).await.unwrap());
    });
    assert_eq!(locker.snapshot().len(), 1, "b still holds its one name");
    assert_eq!(
        Arc::strong_count(&big.resources),
        1,
        "the released request's list of names is still referenced by the table"
    );
}

/// The counts the server's metrics sample agree with the snapshot through
/// grants, shared reads, releases, expiry and a restart, without copying
/// the table.
#[tokio::test(start_paused = true)]
async fn counts_follow_grants_releases_expiry_and_restart() {
    use std::time::Duration;
    let counts = |l: &LocalLocker| {
        let c = l.counts();
        (c.entries, c.resources)
    };
    let l = locker_with(10, 5);
    assert_eq!(counts(&l), (0, 0));
    let many: Vec<String> = (0..20).map(|i| format!("m-{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    assert!(l.lock(&args("w", &many)).await.unwrap());
    assert!(l.rlock(&args("r1", &["shared"])).await.unwrap());
    assert!(l.rlock(&args("r2", &["shared"])).await.unwrap());
    assert_eq!(counts(&l), (22, 21));
    assert_eq!(l.counts().entries, l.snapshot().len());
    assert!(l.runlock(&args("r1", &["shared"])).await.unwrap());
    assert_eq!(counts(&l), (21, 21));
    assert!(l.force_unlock(&args("", &["shared"])).await.unwrap());
    assert_eq!(counts(&l), (20, 20));
    // Expired entries leave the counts once the expiry pass ran.
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert_eq!(counts(&l), (0, 0));
    assert!(l.lock(&args("x", &["a"])).await.unwrap());
    assert_eq!(counts(&l), (1, 1));
    assert_eq!(l.quarantine_remaining(), Duration::ZERO);
    l.restart();
    assert_eq!(counts(&l), (0, 0));
    // A quarantine shorter than the validity is raised to it.
    assert_eq!(l.quarantine_remaining(), Duration::from_secs(10));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(l.quarantine_remaining(), Duration::from_secs(8));
}
