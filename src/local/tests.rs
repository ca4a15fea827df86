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
fn a_name_given_twice_in_hand_built_args_is_refused_and_leaves_nothing() {
    let l = LocalLocker::new();
    block_on(async {
        for names in [&["a", "a"][..], &["b", "a", "b"][..]] {
            let err = l.rlock(&args("r", names)).await.unwrap_err().to_string();
            assert!(err.contains("is given twice in one lock"), "{err}");
        }
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

/// A refresh that arrives after its uid's release, or after its entry was
/// forced open, re-creates nothing in quarantine: it was sent before. A
/// later holder of the forced name is re-created as any holder.
#[tokio::test(start_paused = true)]
async fn a_refresh_after_a_release_in_quarantine_recreates_nothing() {
    let l = locker_with(60, 60);
    l.restart();
    let refresh = |uid: &'static str, name: &'static str| {
        let l = &l;
        async move {
            let answer = l.refresh_mode(&args(uid, &[name]), LockMode::Write).await;
            assert!(answer.is_err_and(|e| e.is_quarantine()));
        }
    };
    refresh("w", "a").await;
    refresh("v", "b").await;
    assert_eq!(entries(&l).len(), 2, "both re-created");
    assert!(l.unlock(&args("w", &["a"])).await.unwrap());
    let forced = LockArgs {
        uid: "".into(),
        ..args("", &["b"])
    };
    assert!(l.force_unlock(&forced).await.unwrap());
    refresh("w", "a").await;
    refresh("v", "b").await;
    assert!(entries(&l).is_empty(), "{:?}", entries(&l));
    // A later holder of the forced name is re-created as any holder.
    refresh("u", "b").await;
    assert_eq!(entries(&l), [("b".into(), "u".into(), LockMode::Write)]);
    assert!(l.unlock(&args("u", &["b"])).await.unwrap());
    // Others are re-created as before.
    refresh("x", "c").await;
    assert_eq!(entries(&l), [("c".into(), "x".into(), LockMode::Write)]);
    // A new restart forgets what the last quarantine released.
    l.restart();
    refresh("w", "a").await;
    assert_eq!(entries(&l), [("a".into(), "w".into(), LockMode::Write)]);
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

/// Names whose places expired behind a holder.
mod expired_places;

/// What the scenes of pushed waits share.
mod pushed;

/// Places of uids forced open by name.
mod forced_places;

/// Queues, pushes, wounds and fencing tokens.
mod queues;

/// A waiter's newer request moving its place back in a line.
mod a_place_moved_back_by_its_waiters_newer_request_lets_the_waiter_behind_it_in;

/// A waiter's place ended by a plain lock of its uid.
mod a_place_ended_by_its_uids_plain_lock_lets_the_readers_behind_it_in;

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

/// A uid forced open in quarantine, by name or by uid, stays refused there
/// for the whole quarantine: a flood of releases (of uids nobody holds)
/// that fills the quarantine's record does not push it out, nor does the
/// validity passing, after which the record of released uids forgets it.
#[tokio::test(start_paused = true)]
async fn a_uid_forced_open_in_quarantine_stays_refused_after_a_flood_of_releases() {
    use std::time::Duration;
    let l = locker_with(60, 180);
    l.restart();
    let refresh = |uid: &'static str, names: &'static [&'static str]| {
        let l = &l;
        async move {
            let answer = l.refresh_mode(&args(uid, names), LockMode::Write).await;
            assert!(answer.is_err_and(|e| e.is_quarantine()));
        }
    };
    refresh("by-name", &["a"]).await;
    refresh("by-uid", &["b"]).await;
    assert_eq!(entries(&l).len(), 2, "both re-created");
    assert!(l.force_unlock(&args("", &["a"])).await.unwrap());
    assert!(l.force_unlock(&args("by-uid", &[])).await.unwrap());
    // More than the quarantine's 8 MiB record holds at 8 + 160 bytes each.
    for i in 0..56_000 {
        let uid = format!("{i:08}");
        let _ = l.unlock(&args(&uid, &["flood"])).await;
    }
    refresh("by-name", &["a"]).await;
    refresh("by-uid", &["b"]).await;
    assert!(entries(&l).is_empty(), "{:?}", entries(&l));
    // Past the validity, still in quarantine.
    tokio::time::sleep(Duration::from_secs(90)).await;
    assert!(l.is_quarantined());
    refresh("by-name", &["a"]).await;
    refresh("by-uid", &["b"]).await;
    assert!(entries(&l).is_empty(), "{:?}", entries(&l));
}

/// Records the uids each push grants.
#[derive(Default)]
struct Granted(std::sync::Mutex<Vec<String>>);

impl crate::PushSink for Granted {
    fn push(&self, _slot: usize, uid: &str, event: crate::PushEvent) {
        if event == crate::PushEvent::Granted {
            self.0.lock().unwrap().push(uid.to_owned());
        }
    }
}

/// Places `uid` in line for `names` in `mode`, with a wake through `sink`
/// (a reservation without one); it must be queued, not granted.
async fn queue(
    l: &LocalLocker,
    sink: &Arc<Granted>,
    uid: &str,
    names: &[&str],
    mode: LockMode,
    wake: bool,
) {
    let wait = crate::WaitArgs {
        ticket: crate::Ticket::now(),
        place_ttl: std::time::Duration::from_secs(60),
        wake: wake.then(|| crate::Wake::new(sink.clone(), 0)),
    };
    let reply = l.lock_wait(&args(uid, names), mode, &wait).await.unwrap();
    assert_ne!(reply, crate::WaitReply::Granted, "{uid} waits");
}

#[test]
fn waiters_on_several_names_are_granted_together_in_line_order_when_a_release_frees_them() {
    use LockMode::{Read, Write};
    let l = LocalLocker::new();
    let sink = Arc::new(Granted::default());
    block_on(async {
        assert!(l.lock(&args("w", &["a"])).await.unwrap());
        queue(&l, &sink, "r1", &["a", "b"], Read, true).await;
        queue(&l, &sink, "r2", &["a", "b"], Read, true).await;
        // Older than r3 on b: a writer keeps r3 waiting there.
        queue(&l, &sink, "w2", &["b"], Write, true).await;
        queue(&l, &sink, "r3", &["a", "b"], Read, true).await;
        assert!(l.unlock(&args("w", &["a"])).await.unwrap());
    });
    assert_eq!(*sink.0.lock().unwrap(), ["r1", "r2"]);
    let held = [("a", "r1"), ("a", "r2"), ("b", "r1"), ("b", "r2")];
    assert_eq!(
        entries(&l),
        held.map(|(name, uid)| (name.to_owned(), uid.to_owned(), LockMode::Read))
    );
}

#[test]
fn of_two_writers_waiting_on_several_names_only_the_older_is_granted() {
    let l = LocalLocker::new();
    let sink = Arc::new(Granted::default());
    block_on(async {
        assert!(l.lock(&args("w", &["a"])).await.unwrap());
        queue(&l, &sink, "w1", &["a", "b"], LockMode::Write, true).await;
        queue(&l, &sink, "w2", &["a", "b"], LockMode::Write, true).await;
        assert!(l.unlock(&args("w", &["a"])).await.unwrap());
    });
    assert_eq!(*sink.0.lock().unwrap(), ["w1"]);
    let held = ["a", "b"].map(|name| (name.to_owned(), "w1".to_owned(), LockMode::Write));
    assert_eq!(entries(&l), held);
}

#[test]
fn an_older_reservation_on_another_name_keeps_a_waiter_on_several_names_waiting() {
    let l = LocalLocker::new();
    let sink = Arc::new(Granted::default());
    block_on(async {
        assert!(l.lock(&args("w", &["a", "b"])).await.unwrap());
        // A reservation holds its turn on b without a wake.
        queue(&l, &sink, "res", &["b"], LockMode::Write, false).await;
        queue(&l, &sink, "r1", &["a", "b"], LockMode::Read, true).await;
        assert!(l.unlock(&args("w", &["a", "b"])).await.unwrap());
    });
    assert!(sink.0.lock().unwrap().is_empty(), "nobody is granted");
    assert!(entries(&l).is_empty());
}

/// A waiter's newer request turning its place from write to read.
mod a_place_turned_from_write_to_read_by_its_waiters_request_lets_the_readers_behind_it_in;

/// Two requests of one waiter on names they do not share.
mod two_requests_of_one_waiter_on_other_names_freed_together_are_both_granted;

/// Seeded runs of waits, locks, unlocks and forces, checked after every
/// call.
mod waiting_randomized;

/// A uid released here, with a place left in another name's line.
mod a_uid_released_on_other_names_is_not_granted_its_place;

/// The promotion's work past places of released uids.
mod a_line_moving_on_past_released_places_does_work_linear_in_the_line;

/// A waiter behind the place of a released uid on a free name.
mod a_waiter_behind_a_released_uids_place_on_a_free_name_is_granted;

/// Readers behind a released writer's place.
mod readers_behind_a_released_writers_place_are_let_in_with_the_readers_before_it;

/// Released places whose requests cover a second name, dropped together.
mod a_line_moving_on_past_released_places_of_two_names_does_work_linear_in_the_line;

/// Released places of requests of many names, dropped together.
mod a_released_uids_request_of_many_names_is_ended_in_work_linear_in_its_places;
