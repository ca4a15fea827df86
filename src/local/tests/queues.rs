//! Queues, pushes, wounds and fencing tokens of a `LocalLocker`.

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
