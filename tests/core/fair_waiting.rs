//! Fair waiting with pushed wake-ups, in process on paused time.
//!
//! Most tests run five `LocalLocker`s and set the retry backoff and the
//! re-check interval far above the hand-off times they measure: a waiter
//! that gets the lock at the instant of the release can only have been
//! woken by a push, since neither a polling round nor a re-check was due.

use crate::common::{as_lockers, nodes};

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common;
use quorum_lock::{
    DRWMutex, Dsync, Error, LocalLocker, LockArgs, LockInfo, LockMode, NetLocker, PushEvent,
    PushSink, ReadGuard, RetryPolicy, Ticket, Timeouts, WaitArgs, WaitReply, Waiting, Wake,
    WriteGuard,
};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::task::JoinHandle;
use tokio::time::{sleep, timeout, Instant};

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Far above every hand-off these tests measure: a poll never comes in time.
const NEVER_POLL: RetryPolicy = RetryPolicy {
    initial: Duration::from_secs(60),
    max: Duration::from_secs(60),
};

/// The longest re-check used with the default lease (a third of its
/// `validity - safety_margin`, 50 s): the safety net never fires in time.
const LATE_RECHECK: Duration = Duration::from_secs(16);

/// Long enough for every in-process call and background release to land,
/// far shorter than any re-check or retry.
const SETTLE: Duration = Duration::from_millis(10);

/// A client that only a push can wake in time.
fn push_client(lockers: Vec<Arc<dyn NetLocker>>, owner: &str, seed: u64) -> Dsync {
    Dsync::builder(lockers)
        .owner(owner)
        .rng_seed(seed)
        .retry(NEVER_POLL)
        .timeouts(Timeouts {
            wait_recheck: LATE_RECHECK,
            ..Timeouts::default()
        })
        .build()
        .unwrap()
}

/// A client with the default settings.
fn default_client(lockers: Vec<Arc<dyn NetLocker>>, owner: &str, seed: u64) -> Dsync {
    common::seeded(lockers, owner, seed)
}

/// Who got a lock, and when, in the order they got it.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<(&'static str, Instant)>>>);

impl Log {
    fn got(&self, who: &'static str) {
        self.0.lock().unwrap().push((who, Instant::now()));
    }

    fn names(&self) -> Vec<&'static str> {
        self.0.lock().unwrap().iter().map(|(w, _)| *w).collect()
    }

    fn at(&self, who: &str) -> Instant {
        self.0
            .lock()
            .unwrap()
            .iter()
            .find(|(w, _)| *w == who)
            .unwrap_or_else(|| panic!("{who} never got the lock"))
            .1
    }
}

fn spawn_writer(m: &DRWMutex, who: &'static str, log: &Log) -> JoinHandle<WriteGuard> {
    let (m, log) = (m.clone(), log.clone());
    tokio::spawn(async move {
        let guard = m.lock().await.expect("lock");
        log.got(who);
        guard
    })
}

fn spawn_reader(m: &DRWMutex, who: &'static str, log: &Log) -> JoinHandle<ReadGuard> {
    let (m, log) = (m.clone(), log.clone());
    tokio::spawn(async move {
        let guard = m.read().await.expect("read");
        log.got(who);
        guard
    })
}

/// Places in line on each node.
fn places(nodes: &[Arc<LocalLocker>]) -> Vec<usize> {
    nodes
        .iter()
        .map(|n| {
            n.snapshot(); // sweeps expired places
            n.waiting()
        })
        .collect()
}

/// Uids holding `resource` on each node.
fn holders(nodes: &[Arc<LocalLocker>], resource: &str) -> Vec<Vec<String>> {
    nodes
        .iter()
        .map(|n| {
            let mut uids: Vec<String> = n
                .snapshot()
                .into_iter()
                .filter(|e: &LockInfo| e.resource == resource)
                .map(|e| e.uid)
                .collect();
            uids.sort();
            uids
        })
        .collect()
}

fn everywhere<T: Clone>(n: usize, value: T) -> Vec<T> {
    vec![value; n]
}

// ---------------------------------------------------------------------------
// First come, first served
// ---------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn fifo_hand_off_is_pushed_at_the_instant_of_the_release() {
    let nodes = nodes(5);
    let ds = push_client(as_lockers(&nodes), "fifo", 1);
    let m = ds.rw_mutex(["r"]).unwrap();
    let log = Log::default();
    let a = m.lock().await.unwrap();
    let b = spawn_writer(&m, "B", &log);
    sleep(SETTLE).await;
    let c = spawn_writer(&m, "C", &log);
    sleep(SETTLE).await;
    assert_eq!(
        places(&nodes),
        everywhere(5, 2),
        "B and C wait on every node"
    );
    assert!(log.names().is_empty());

    a.unlock().await.unwrap();
    let released = Instant::now();
    let b = b.await.unwrap();
    assert_eq!(log.names(), ["B"], "B waited first");
    assert_eq!(
        log.at("B") - released,
        Duration::ZERO,
        "B is woken by the release itself (no poll or re-check is due for {LATE_RECHECK:?})"
    );
    assert_eq!(
        holders(&nodes, "r"),
        everywhere(5, vec![b.uid().to_owned()])
    );
    assert_eq!(places(&nodes), everywhere(5, 1), "C still waits");

    sleep(secs(1)).await;
    assert_eq!(log.names(), ["B"], "C does not get in while B holds");
    b.unlock().await.unwrap();
    let released = Instant::now();
    let c = c.await.unwrap();
    assert_eq!(log.names(), ["B", "C"]);
    assert_eq!(log.at("C") - released, Duration::ZERO);
    c.unlock().await.unwrap();
    assert_eq!(places(&nodes), everywhere(5, 0));
    assert_eq!(holders(&nodes, "r"), everywhere(5, Vec::<String>::new()));
}

#[tokio::test(start_paused = true)]
async fn a_holder_that_locks_again_at_once_goes_behind_the_waiters() {
    let nodes = nodes(5);
    let ds = push_client(as_lockers(&nodes), "relock", 2);
    let m = ds.rw_mutex(["r"]).unwrap();
    let log = Log::default();
    let a = m.lock().await.unwrap();
    let b = spawn_writer(&m, "B", &log);
    sleep(SETTLE).await;
    let c = spawn_writer(&m, "C", &log);
    sleep(SETTLE).await;

    a.unlock().await.unwrap();
    // At once, before anything else runs: B already holds on every node.
    assert!(matches!(m.try_lock().await, Err(Error::WouldBlock)));
    let again = spawn_writer(&m, "A again", &log);
    sleep(SETTLE).await;
    assert_eq!(log.names(), ["B"]);
    assert_eq!(places(&nodes), everywhere(5, 2), "C and A again wait");

    b.await.unwrap().unlock().await.unwrap();
    sleep(SETTLE).await;
    assert_eq!(log.names(), ["B", "C"], "A again is behind C");
    c.await.unwrap().unlock().await.unwrap();
    sleep(SETTLE).await;
    assert_eq!(log.names(), ["B", "C", "A again"]);
    again.await.unwrap().unlock().await.unwrap();
    assert_eq!(places(&nodes), everywhere(5, 0));
}

#[tokio::test(start_paused = true)]
async fn a_waiting_writer_goes_before_later_readers_who_then_read_together() {
    let nodes = nodes(5);
    let ds = push_client(as_lockers(&nodes), "rw", 3);
    let m = ds.rw_mutex(["r"]).unwrap();
    let log = Log::default();
    let mut readers = Vec::new();
    for _ in 0..3 {
        readers.push(m.read().await.unwrap());
    }
    let w = spawn_writer(&m, "W", &log);
    sleep(SETTLE).await;
    let r4 = spawn_reader(&m, "R4", &log);
    let r5 = spawn_reader(&m, "R5", &log);
    sleep(SETTLE).await;
    assert!(
        log.names().is_empty(),
        "R4 and R5 could share with the readers, but a writer waits before them"
    );
    assert!(matches!(m.try_read().await, Err(Error::WouldBlock)));
    assert_eq!(places(&nodes), everywhere(5, 3));

    // The three readers leave one by one; the writer goes when the last does.
    let last = readers.pop().unwrap();
    for r in readers {
        r.unlock().await.unwrap();
        sleep(SETTLE).await;
        assert!(log.names().is_empty());
    }
    last.unlock().await.unwrap();
    let released = Instant::now();
    let w = w.await.unwrap();
    assert_eq!(log.names(), ["W"]);
    assert_eq!(log.at("W") - released, Duration::ZERO);

    w.unlock().await.unwrap();
    let released = Instant::now();
    let (r4, r5) = (r4.await.unwrap(), r5.await.unwrap());
    assert_eq!(log.at("R4") - released, Duration::ZERO);
    assert_eq!(log.at("R5") - released, Duration::ZERO);
    // Both hold at once, on every node.
    let mut both = vec![r4.uid().to_owned(), r5.uid().to_owned()];
    both.sort();
    assert_eq!(holders(&nodes, "r"), everywhere(5, both));
    assert!(!r4.is_lost() && !r5.is_lost());
    r4.unlock().await.unwrap();
    r5.unlock().await.unwrap();
    assert_eq!(places(&nodes), everywhere(5, 0));
}

// ---------------------------------------------------------------------------
// Cancelled and crashed waiters
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Cancel {
    DropFuture,
    AbortTask,
    LockTimeout,
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_waiter_leaves_no_place_and_the_next_one_proceeds() {
    for cancel in [Cancel::DropFuture, Cancel::AbortTask, Cancel::LockTimeout] {
        let nodes = nodes(5);
        let ds = push_client(as_lockers(&nodes), "cancel", 4);
        let m = ds.rw_mutex(["r"]).unwrap();
        let log = Log::default();
        let a = m.lock().await.unwrap();

        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let b = {
            let m = m.clone();
            tokio::spawn(async move {
                match cancel {
                    Cancel::DropFuture => {
                        tokio::select! {
                            _ = m.lock() => panic!("B got the lock"),
                            _ = stopped => {}
                        }
                    }
                    Cancel::AbortTask => {
                        let _ = m.lock().await;
                        panic!("B got the lock");
                    }
                    Cancel::LockTimeout => {
                        let got = m.lock_timeout(secs(5)).await;
                        assert!(matches!(got, Err(Error::Timeout)), "{cancel:?}");
                    }
                }
            })
        };
        sleep(SETTLE).await;
        let c = spawn_writer(&m, "C", &log);
        sleep(SETTLE).await;
        assert_eq!(places(&nodes), everywhere(5, 2), "{cancel:?}");

        match cancel {
            Cancel::DropFuture => stop.send(()).unwrap(),
            Cancel::AbortTask => b.abort(),
            Cancel::LockTimeout => sleep(secs(5)).await,
        }
        let _ = b.await;
        sleep(SETTLE).await;
        // Long before any place could expire (its TTL is 3 × 16 s).
        assert_eq!(
            places(&nodes),
            everywhere(5, 1),
            "{cancel:?}: only C's place is left"
        );

        a.unlock().await.unwrap();
        let released = Instant::now();
        let c = c.await.unwrap();
        assert_eq!(log.at("C") - released, Duration::ZERO, "{cancel:?}");
        assert_eq!(
            holders(&nodes, "r"),
            everywhere(5, vec![c.uid().to_owned()]),
            "{cancel:?}"
        );
        c.unlock().await.unwrap();
        assert_eq!(places(&nodes), everywhere(5, 0), "{cancel:?}");
        assert_eq!(holders(&nodes, "r"), everywhere(5, Vec::<String>::new()));
    }
}

#[tokio::test(start_paused = true)]
async fn a_waiter_cancelled_with_partial_grants_gives_them_to_the_next() {
    let nodes = nodes(5);
    let ds = push_client(as_lockers(&nodes), "partial", 5);
    let m = ds.rw_mutex(["r"]).unwrap();
    let log = Log::default();
    let a = m.lock().await.unwrap();
    let b = spawn_writer(&m, "B", &log);
    sleep(SETTLE).await;
    let c = spawn_writer(&m, "C", &log);
    sleep(SETTLE).await;
    // A's entries vanish from two nodes (an operator, say): B is granted
    // there, short of its quorum of three.
    let a_args = args(a.uid(), &["r"]);
    for node in &nodes[..2] {
        assert!(node.unlock(&a_args).await.unwrap());
    }
    sleep(SETTLE).await;
    let b_uid = holders(&nodes, "r")[0].clone();
    assert_eq!(b_uid.len(), 1);
    assert_eq!(holders(&nodes, "r")[1], b_uid);
    assert!(log.names().is_empty());

    b.abort();
    let _ = b.await;
    sleep(SETTLE).await;
    // C took B's two grants; B left nothing anywhere.
    let after = holders(&nodes, "r");
    assert!(
        after.iter().flatten().all(|uid| *uid != b_uid[0]),
        "{after:?}"
    );
    assert_eq!(places(&nodes), [0, 0, 1, 1, 1]);
    assert!(log.names().is_empty(), "C has 2 of 5");

    a.unlock().await.unwrap();
    let c = c.await.unwrap();
    assert_eq!(log.names(), ["C"]);
    assert_eq!(
        holders(&nodes, "r"),
        everywhere(5, vec![c.uid().to_owned()])
    );
    c.unlock().await.unwrap();
    assert_eq!(places(&nodes), everywhere(5, 0));
}

fn args(uid: &str, resources: &[&str]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: resources.iter().map(|r| r.to_string()).collect(),
        owner: "dead-process".into(),
        source: "tests/fair_waiting.rs".into(),
        quorum: 3,
    }
}

/// A waiter whose process is gone: pushes to it go nowhere.
struct Nowhere;

impl PushSink for Nowhere {
    fn push(&self, _slot: usize, _uid: &str, _event: PushEvent) {}
}

/// Takes a place on every node, as a waiter's first request does, and never
/// asks again: its process died right after sending it.
async fn dead_waiter(
    nodes: &[Arc<LocalLocker>],
    uid: &str,
    mode: LockMode,
    ticket: Ticket,
    place_ttl: Duration,
) -> Vec<WaitReply> {
    let wait = WaitArgs {
        ticket,
        place_ttl,
        wake: Some(Wake::new(Arc::new(Nowhere), 0)),
    };
    let mut replies = Vec::new();
    for node in nodes {
        replies.push(
            node.lock_wait(&args(uid, &["r"]), mode, &wait)
                .await
                .unwrap(),
        );
    }
    replies
}

/// Bound: a dead waiter's place blocks live waiters for at most its place
/// TTL (3 × `wait_recheck`) after its last request; a live waiter notices at
/// its next re-send, so it gets the lock within `place_ttl + wait_recheck`
/// of the dead waiter's last request.
#[tokio::test(start_paused = true)]
async fn a_dead_waiters_place_stops_blocking_after_the_place_ttl() {
    let nodes = nodes(5);
    let ds = default_client(as_lockers(&nodes), "live", 6);
    let recheck = Timeouts::default().wait_recheck;
    let place_ttl = recheck * 3;
    let m = ds.rw_mutex(["r"]).unwrap();
    let log = Log::default();
    let reading = m.read().await.unwrap();
    // A writer that died waiting, older than every live waiter.
    let ticket = Ticket::now();
    let replies = dead_waiter(&nodes, "dead", LockMode::Write, ticket, place_ttl).await;
    assert_eq!(replies, everywhere(5, WaitReply::Queued));
    let died = Instant::now();
    // A reader could share with `reading`, but the dead writer is first.
    let r = spawn_reader(&m, "R", &log);
    sleep(place_ttl - ms(100)).await;
    assert!(log.names().is_empty(), "the place is still valid");
    let r = timeout(recheck + ms(200), r)
        .await
        .expect("R is stuck")
        .unwrap();
    let waited = log.at("R") - died;
    assert!(
        waited >= place_ttl && waited <= place_ttl + recheck,
        "R got the lock {waited:?} after the writer died; the bound is {place_ttl:?} + {recheck:?}"
    );
    r.unlock().await.unwrap();
    reading.unlock().await.unwrap();
    assert_eq!(places(&nodes), everywhere(5, 0));
}

/// Bound: a dead waiter promoted to a grant holds it until the lockers
/// expire it, `LockerConfig::validity` after the promotion; the live waiter
/// notices at its next re-send, so it gets the lock within
/// `validity + wait_recheck` of the release that promoted the dead one.
#[tokio::test(start_paused = true)]
async fn a_dead_waiter_promoted_to_a_grant_stops_blocking_when_the_grant_expires() {
    let nodes = nodes(5);
    let validity = nodes[0].config().validity;
    let ds = default_client(as_lockers(&nodes), "live", 7);
    let recheck = Timeouts::default().wait_recheck;
    let m = ds.rw_mutex(["r"]).unwrap();
    let log = Log::default();
    let a = m.lock().await.unwrap();
    let ticket = Ticket::now();
    let replies = dead_waiter(&nodes, "dead", LockMode::Write, ticket, recheck * 3).await;
    assert_eq!(replies, everywhere(5, WaitReply::Queued));
    let b = spawn_writer(&m, "B", &log);
    sleep(SETTLE).await;
    a.unlock().await.unwrap();
    let promoted = Instant::now();
    assert_eq!(
        holders(&nodes, "r"),
        everywhere(5, vec!["dead".to_owned()]),
        "the dead waiter was first in line"
    );
    sleep(validity - ms(100)).await;
    assert!(log.names().is_empty(), "the dead waiter's grant is valid");
    let b = timeout(recheck + ms(200), b)
        .await
        .expect("B is stuck")
        .unwrap();
    let waited = log.at("B") - promoted;
    assert!(
        waited >= validity && waited <= validity + recheck,
        "B got the lock {waited:?} after the release; the bound is {validity:?} + {recheck:?}"
    );
    b.unlock().await.unwrap();
    assert_eq!(places(&nodes), everywhere(5, 0));
}

// ---------------------------------------------------------------------------
// Polling
// ---------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn polling_mode_still_hands_over_within_the_backoff() {
    let nodes = nodes(5);
    let retry = RetryPolicy::default();
    let ds = Dsync::builder(as_lockers(&nodes))
        .owner("poller")
        .rng_seed(8)
        .waiting(Waiting::Poll)
        .build()
        .unwrap();
    let m = ds.rw_mutex(["r"]).unwrap();
    let log = Log::default();
    let a = m.lock().await.unwrap();
    let b = spawn_writer(&m, "B", &log);
    sleep(secs(5)).await;
    assert_eq!(places(&nodes), everywhere(5, 0), "a poller keeps no place");
    a.unlock().await.unwrap();
    let released = Instant::now();
    let b = timeout(retry.max + ms(100), b)
        .await
        .expect("the poller never retried")
        .unwrap();
    assert!(log.at("B") - released <= retry.max);
    b.unlock().await.unwrap();
    assert_eq!(holders(&nodes, "r"), everywhere(5, Vec::<String>::new()));
}

/// One client that polls and one that waits in line take turns on one
/// name, with think time between their turns; both finish their rounds.
#[tokio::test(start_paused = true)]
async fn a_poll_client_and_a_push_client_both_make_progress() {
    const ROUNDS: usize = 20;
    for seed in 0..5u64 {
        let nodes = nodes(5);
        let poller = Dsync::builder(as_lockers(&nodes))
            .owner("poller")
            .rng_seed(seed)
            .waiting(Waiting::Poll)
            .build()
            .unwrap();
        let pusher = default_client(as_lockers(&nodes), "pusher", seed);
        let inside = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicUsize::new(0));
        let run = |ds: Dsync, salt: u64| {
            let (inside, done) = (inside.clone(), done.clone());
            tokio::spawn(async move {
                let mut rng = SmallRng::seed_from_u64(seed * 2 + salt);
                let m = ds.rw_mutex(["r"]).unwrap();
                for _ in 0..ROUNDS {
                    let guard = m.lock().await.unwrap();
                    assert!(!inside.swap(true, Ordering::SeqCst), "seed {seed}: overlap");
                    sleep(ms(rng.random_range(1..20))).await;
                    inside.store(false, Ordering::SeqCst);
                    guard.unlock().await.unwrap();
                    done.fetch_add(1, Ordering::SeqCst);
                    sleep(ms(rng.random_range(1..20))).await;
                }
            })
        };
        let both = futures::future::join(run(poller, 0), run(pusher, 1));
        // 40 turns of at most 40 ms each, plus the poller's backoff (at most
        // 1 s per retry): far less than this.
        let (p, q) = timeout(secs(120), both).await.unwrap_or_else(|_| {
            panic!(
                "seed {seed}: stuck after {} turns",
                done.load(Ordering::SeqCst)
            )
        });
        p.unwrap();
        q.unwrap();
        assert_eq!(done.load(Ordering::SeqCst), 2 * ROUNDS, "seed {seed}");
        assert_eq!(places(&nodes), everywhere(5, 0), "seed {seed}");
    }
}

// ---------------------------------------------------------------------------
// Several resources
// ---------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_multi_resource_waiter_is_granted_all_or_nothing_when_both_are_free() {
    let nodes = nodes(5);
    let ds = push_client(as_lockers(&nodes), "multi", 9);
    let (ma, mb, mab) = (
        ds.rw_mutex(["a"]).unwrap(),
        ds.rw_mutex(["b"]).unwrap(),
        ds.rw_mutex(["a", "b"]).unwrap(),
    );
    let log = Log::default();
    let ha = ma.lock().await.unwrap();
    let hb = mb.lock().await.unwrap();
    let w = spawn_writer(&mab, "W", &log);
    sleep(SETTLE).await;
    let x = spawn_writer(&ma, "X", &log);
    sleep(SETTLE).await;
    assert_eq!(places(&nodes), everywhere(5, 3), "W on a and b, X on a");

    ha.unlock().await.unwrap();
    sleep(SETTLE).await;
    assert!(
        log.names().is_empty(),
        "b is still held, and X waits behind W"
    );
    assert_eq!(
        holders(&nodes, "a"),
        everywhere(5, Vec::<String>::new()),
        "W holds no part of its lock"
    );
    assert!(matches!(ma.try_lock().await, Err(Error::WouldBlock)));

    hb.unlock().await.unwrap();
    let released = Instant::now();
    let w = w.await.unwrap();
    assert_eq!(log.names(), ["W"]);
    assert_eq!(log.at("W") - released, Duration::ZERO);
    let uid = vec![w.uid().to_owned()];
    assert_eq!(holders(&nodes, "a"), everywhere(5, uid.clone()));
    assert_eq!(holders(&nodes, "b"), everywhere(5, uid));

    w.unlock().await.unwrap();
    let x = x.await.unwrap();
    assert_eq!(log.names(), ["W", "X"]);
    x.unlock().await.unwrap();
    assert_eq!(places(&nodes), everywhere(5, 0));
}

// ---------------------------------------------------------------------------
// Split grants on even clusters
// ---------------------------------------------------------------------------

/// The nodes as one client sees them, each behind its own
/// `testing::FaultyLocker`: those in `slow` answer (and push) `delay` late.
#[cfg(feature = "testing")]
fn view(
    nodes: &[Arc<LocalLocker>],
    slow: impl Fn(usize) -> bool,
    delay: Duration,
) -> Vec<Arc<dyn NetLocker>> {
    use quorum_lock::testing::{FaultyLocker, Latency};
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let link = FaultyLocker::local(n.clone(), i as u64);
            if slow(i) {
                link.set_latency(Latency::Fixed(delay));
            }
            Arc::new(link) as Arc<dyn NetLocker>
        })
        .collect()
}

/// A writer and a second waiter start together; each reaches one half of
/// an even cluster first, so each is granted half of it, one short of a
/// write quorum. When the second one writes too, the older one wounds it
/// where it is queued behind it, it steps back, and both get the lock in
/// ticket order: one push round trip after the crossing requests arrive,
/// not at a re-check. When the second one reads, half is a read quorum.
#[cfg(feature = "testing")]
#[tokio::test(start_paused = true)]
async fn split_grants_on_even_clusters_resolve_in_ticket_order() {
    const CROSSING: Duration = Duration::from_millis(10);
    for n in [2, 4, 6] {
        for mode in [LockMode::Write, LockMode::Read] {
            let nodes = nodes(n);
            let half = n / 2;
            let older = push_client(view(&nodes, |i| i < half, CROSSING), "older", 10);
            let younger = push_client(view(&nodes, |i| i >= half, CROSSING), "younger", 11);
            let log = Log::default();
            let start = Instant::now();
            let first = {
                let (m, log) = (older.rw_mutex(["r"]).unwrap(), log.clone());
                tokio::spawn(async move {
                    let guard = m.lock().await.unwrap();
                    log.got("older");
                    sleep(ms(50)).await;
                    guard.unlock().await.unwrap();
                })
            };
            // The second waiter draws its ticket after the first one.
            tokio::task::yield_now().await;
            let second = {
                let m = younger.rw_mutex(["r"]).unwrap();
                let log = log.clone();
                tokio::spawn(async move {
                    let guard = match mode {
                        LockMode::Write => {
                            let g = m.lock().await.unwrap();
                            log.got("younger");
                            Box::new(g) as Box<dyn Send>
                        }
                        LockMode::Read => {
                            let g = m.read().await.unwrap();
                            log.got("younger");
                            Box::new(g) as Box<dyn Send>
                        }
                    };
                    drop(guard);
                })
            };
            let ctx = format!("n = {n}, younger {mode:?}");
            timeout(secs(5), async {
                first.await.unwrap();
                second.await.unwrap();
            })
            .await
            .unwrap_or_else(|_| panic!("{ctx}: deadlocked; got {:?}", log.names()));
            match mode {
                LockMode::Write => {
                    assert_eq!(log.names(), ["older", "younger"], "{ctx}");
                    let took = log.at("older") - start;
                    assert!(
                        took <= CROSSING * 4,
                        "{ctx}: the older writer waited {took:?}, as if for a re-check"
                    );
                }
                // A reader needs only half of an even cluster: the younger
                // reader may win its half at once; the writer then waits
                // for it. Either way nobody waits for a re-check.
                LockMode::Read => {
                    assert_eq!(log.names().len(), 2, "{ctx}");
                    assert!(
                        log.at("older") - start <= CROSSING * 4 + ms(50),
                        "{ctx}: {:?}",
                        log.at("older") - start
                    );
                }
            }
            sleep(SETTLE * 5).await;
            assert_eq!(places(&nodes), everywhere(n, 0), "{ctx}");
            assert_eq!(
                holders(&nodes, "r"),
                everywhere(n, Vec::<String>::new()),
                "{ctx}"
            );
        }
    }
}

/// The same split, made by hand on the lockers: the younger waiter's
/// requests reach half the nodes first, the older one's the other half.
#[cfg(feature = "testing")]
#[tokio::test(start_paused = true)]
async fn hand_ordered_split_requests_resolve_without_deadlock() {
    for n in [2, 4, 6] {
        let nodes = nodes(n);
        let half = n / 2;
        // The older waiter is a real client; it reaches the second half
        // first because a dead-slow first half delays it.
        let older = push_client(view(&nodes, |i| i < half, ms(20)), "older", 12);
        // The younger one is played by hand, with a push log.
        #[derive(Default)]
        struct Seen(Mutex<Vec<PushEvent>>);
        impl PushSink for Seen {
            fn push(&self, _slot: usize, _uid: &str, event: PushEvent) {
                self.0.lock().unwrap().push(event);
            }
        }
        let seen = Arc::new(Seen::default());
        let log = Log::default();
        let m = older.rw_mutex(["r"]).unwrap();
        let o = spawn_writer(&m, "older", &log);
        sleep(ms(1)).await; // older's ticket is drawn; its fast half granted
        let young = WaitArgs {
            ticket: Ticket::now(),
            place_ttl: secs(3),
            wake: Some(Wake::new(seen.clone(), 0)),
        };
        let y = args("younger", &["r"]);
        let mut replies = Vec::new();
        for node in &nodes {
            replies.push(node.lock_wait(&y, LockMode::Write, &young).await.unwrap());
        }
        let expect: Vec<WaitReply> = (0..n)
            .map(|i| {
                if i < half {
                    WaitReply::Granted
                } else {
                    WaitReply::Queued
                }
            })
            .collect();
        assert_eq!(replies, expect, "n = {n}");
        // The older waiter's slow requests arrive and wound the younger one.
        sleep(ms(20)).await;
        assert!(
            seen.0.lock().unwrap().contains(&PushEvent::Wounded),
            "n = {n}: {:?}",
            seen.0.lock().unwrap()
        );
        // The younger one steps back as a coordinator would.
        for node in &nodes[..half] {
            assert!(node.unlock(&y).await.unwrap());
        }
        let o = timeout(secs(1), o).await.expect("older is stuck").unwrap();
        assert_eq!(log.names(), ["older"], "n = {n}");
        o.unlock().await.unwrap();
        sleep(ms(50)).await;
        // The younger one's places were promoted where they were kept.
        let granted = seen
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|e| **e == PushEvent::Granted)
            .count();
        assert_eq!(granted, n - half, "n = {n}");
        for node in &nodes {
            node.unlock(&y).await.unwrap();
        }
        assert_eq!(places(&nodes), everywhere(n, 0));
    }
}

// ---------------------------------------------------------------------------
// Partial grants kept while waiting
// ---------------------------------------------------------------------------

/// A waiter's re-sends keep alive a grant it got long before it wins, so a
/// lock it wins with that grant is safe. (Found by these tests as a bug,
/// fixed in 0d8aadb: the re-send did not renew the grant.)
///
/// Three nodes. H holds nodes 1 and 2 from t = 0; W starts waiting at t = 0
/// and is granted node 0 at once, queued on nodes 1 and 2, and re-sends
/// every second. At 59.5 s H leaves node 1: W wins {0, 1}, trusting the
/// lock from its last re-send (about 59 s). Without the renewal, node 0
/// expired W's entry at 60 s, 60 s after the first grant; H leaves node 2
/// at 63.5 s (after W's leftover place there lapsed), and another client was
/// then granted nodes 0 and 2, a write quorum, while W's guard said the
/// lock was not lost.
#[tokio::test(start_paused = true)]
async fn a_partial_grant_held_while_waiting_is_renewed_until_the_waiter_wins() {
    let nodes = nodes(3);
    let ds = default_client(as_lockers(&nodes), "w", 13);
    let h = args("h", &["r"]);
    for node in &nodes[1..] {
        assert!(node.lock(&h).await.unwrap());
    }
    let log = Log::default();
    let w = spawn_writer(&ds.rw_mutex(["r"]).unwrap(), "W", &log);
    sleep(secs(30)).await;
    for node in &nodes[1..] {
        assert!(node.refresh(&h).await.unwrap());
    }
    sleep(ms(29_500)).await;
    assert!(nodes[1].unlock(&h).await.unwrap());
    let w = w.await.unwrap();
    // W's place on node 2 lapses 3 s after its last re-send; H leaves then.
    sleep(secs(4)).await;
    assert!(nodes[2].unlock(&h).await.unwrap());
    assert_eq!(
        holders(&nodes, "r")[0],
        [w.uid().to_owned()],
        "node 0 still holds W's entry"
    );
    let other = default_client(as_lockers(&nodes), "x", 14);
    let x = other.rw_mutex(["r"]).unwrap().try_lock().await;
    assert!(
        x.is_err() || w.is_lost(),
        "two writers hold r {:?} after W won: W ({}, not lost) and X ({}); holders per node: {:?}",
        Instant::now() - log.at("W"),
        w.uid(),
        x.as_ref().map(|g| g.uid()).unwrap_or_default(),
        holders(&nodes, "r"),
    );
}
