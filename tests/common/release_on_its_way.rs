//! The scene the `finish_releases` tests start from: a guard's release
//! left on its way, on a runtime that is never driven again.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;

use quorum_lock::{Dsync, LocalLocker, NetLocker, Timeouts};

use super::hooked::Hooked;

/// Three lockers, locker 0 a [`Hooked`] one; guard "a" taken and dropped
/// on a runtime that is not driven again (unless the scene says so), so its release is a batch on its
/// way that only `finish_releases` (or a drain task, once it is overdue)
/// sends.
pub struct ReleaseOnItsWay {
    pub nodes: Vec<Arc<LocalLocker>>,
    pub ds: Dsync,
    /// The dropped guard's uid.
    pub uid: String,
    /// Set once "a" is held: what `hook` made locker 0 do while it is set
    /// (answer unlocks late, say) starts with the release.
    pub slow: Arc<AtomicBool>,
    /// The runtime the guard was dropped on, kept to the end: idle, unless
    /// a scene drives it later (its release and drain tasks then run).
    pub dropped_on: tokio::runtime::Runtime,
}

impl ReleaseOnItsWay {
    /// Builds the scene: `hook` makes locker 0 from its plain locker and
    /// the `slow` switch.
    pub fn new(seed: u64, hook: impl FnOnce(Hooked, Arc<AtomicBool>) -> Hooked) -> Self {
        Self::build(seed, |lockers| super::client(lockers, seed), hook)
    }

    /// The same, with the coordinator's `timeouts`.
    pub fn with_timeouts(
        seed: u64,
        timeouts: Timeouts,
        hook: impl FnOnce(Hooked, Arc<AtomicBool>) -> Hooked,
    ) -> Self {
        Self::build(
            seed,
            |lockers| super::with_timeouts(lockers, seed, timeouts),
            hook,
        )
    }

    fn build(
        seed: u64,
        client: impl FnOnce(Vec<Arc<dyn NetLocker>>) -> Dsync,
        hook: impl FnOnce(Hooked, Arc<AtomicBool>) -> Hooked,
    ) -> Self {
        eprintln!("seed {seed}");
        let nodes = super::nodes(3);
        let slow = Arc::new(AtomicBool::new(false));
        let mut lockers: Vec<Arc<dyn NetLocker>> = super::as_lockers(&nodes);
        lockers[0] = hook(Hooked::new(nodes[0].clone()), slow.clone()).shared();
        let ds = client(lockers);
        let idle = super::runtime();
        let guard = idle.block_on(super::try_lock(&ds, "a"));
        let uid = guard.uid().to_owned();
        slow.store(true, Ordering::SeqCst);
        // Dropped on `idle`, which is not driven again: its release task
        // never runs.
        super::drop_on_an_idle_runtime(&idle, guard);
        ReleaseOnItsWay {
            nodes,
            ds,
            uid,
            slow,
            dropped_on: idle,
        }
    }

    /// Which lockers hold "a" now.
    pub fn holding(&self) -> Vec<bool> {
        super::holding(&self.nodes, &self.uid)
    }
}

/// Three lockers, locker 0 the [`Hooked`] one `hook` makes from its plain
/// locker and the `armed` switch; guard "a" taken, `armed` set, and the
/// guard dropped on a paused runtime that goes on being driven (so its
/// release task runs beside the call), then `finish_releases(within)`
/// called at once. Returns what the call gave and which lockers hold "a"
/// then.
pub fn finish_releases_beside_a_driven_release(
    seed: u64,
    within: std::time::Duration,
    hook: impl FnOnce(Hooked, Arc<AtomicBool>) -> Hooked,
) -> (Result<(), quorum_lock::Error>, Vec<bool>) {
    eprintln!("seed {seed}");
    let nodes = super::nodes(3);
    let armed = Arc::new(AtomicBool::new(false));
    let mut lockers: Vec<Arc<dyn NetLocker>> = super::as_lockers(&nodes);
    lockers[0] = hook(Hooked::new(nodes[0].clone()), armed.clone()).shared();
    let ds = super::client(lockers, seed);
    super::paused_runtime().block_on(async {
        let a = super::try_lock(&ds, "a").await;
        let uid = a.uid().to_owned();
        armed.store(true, Ordering::SeqCst);
        drop(a);
        let finished = ds.finish_releases(within).await;
        (finished, super::holding(&nodes, &uid))
    })
}

/// Polls `call` once; whether it was done then. Left undone, it is
/// neither polled again nor dropped until its owner says so.
pub async fn poll_once<F: Future>(call: &mut Pin<Box<F>>) -> bool {
    std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx).is_ready())).await
}

/// Who sent an unlock: its runtime, and whether from a spawned task (a
/// release or drain task) or a `block_on` future (a call driven there).
pub type Sender = (tokio::runtime::Id, bool);

/// The unlocks a hooked locker was sent, by uid and [`Sender`]: what the
/// once-per-call scenes count.
#[derive(Clone, Default)]
pub struct UnlockSenders(Arc<std::sync::Mutex<Vec<(String, Sender)>>>);

impl UnlockSenders {
    /// Records an unlock of `uid` sent from where this runs; returns
    /// whether it came from a spawned task.
    pub fn record(&self, uid: &str) -> bool {
        let from_task = tokio::task::try_id().is_some();
        let sender = (tokio::runtime::Handle::current().id(), from_task);
        self.lock().push((uid.to_owned(), sender));
        from_task
    }

    /// `hooked` recording every unlock here and replying to each 60 s
    /// late while `slow` is set: the slow locker of the once-per-call
    /// scenes.
    pub fn slow_locker(&self, hooked: Hooked, slow: Arc<AtomicBool>) -> Hooked {
        use super::hooked::{Call, Late};
        let recorded = self.clone();
        hooked
            .refusing(move |call, args| {
                if call == Call::Unlock {
                    recorded.record(&args.uid);
                }
                None
            })
            .unlocks_late_while(slow, Late::Replying, std::time::Duration::from_secs(60))
    }

    /// How many unlocks of `uid` came from a sender `who` picks.
    pub fn count(&self, uid: &str, who: impl Fn(&Sender) -> bool) -> usize {
        self.lock()
            .iter()
            .filter(|(u, s)| u == uid && who(s))
            .count()
    }

    /// How many unlocks of `uid` a call driven by `block_on` on `runtime`
    /// sent.
    pub fn by_call_on(&self, uid: &str, runtime: &tokio::runtime::Runtime) -> usize {
        let id = runtime.handle().id();
        self.count(uid, |s| s.0 == id && !s.1)
    }

    /// Drives `runtime` until it sent `at_least` unlocks of `uid` (its
    /// release task's and then its drain task's, say), for 10 s at most;
    /// returns whether it did and how many it sent.
    pub fn drive_until_sent(
        &self,
        runtime: &tokio::runtime::Runtime,
        uid: &str,
        at_least: usize,
    ) -> (bool, usize) {
        let id = runtime.handle().id();
        let on_it = |s: &Sender| s.0 == id;
        runtime.block_on(async {
            let waited = tokio::time::timeout(std::time::Duration::from_secs(10), async {
                while self.count(uid, on_it) < at_least {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
            })
            .await;
            (waited.is_ok(), self.count(uid, on_it))
        })
    }

    /// Every unlock recorded, for a failure's message.
    pub fn all(&self) -> Vec<(String, Sender)> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, Sender)>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The scene of a drain task's batch under way: locker 0 refuses unlocks
/// while guard "a" and then the others are dropped, so their unlocks wait
/// in its queue for a drain task; it then takes unlocks again, each of the
/// others' arriving as late as `late` says, and the drain task's probe
/// ("a"'s unlock) lands while the rest of its batch is on its way.
pub struct DrainBatchUnderWay {
    pub nodes: Vec<Arc<LocalLocker>>,
    pub ds: Dsync,
    /// Locker 0 refuses unlocks while set.
    pub down: Arc<AtomicBool>,
    /// The others' uids, once the scene armed their lateness.
    late_uids: Arc<std::sync::Mutex<Vec<String>>>,
}

/// What [`DrainBatchUnderWay::run`] left: the uids of "a" and of the
/// others, and whether "a"'s unlock landed on locker 0.
pub struct ProbeLanded {
    pub a: String,
    pub others: Vec<String>,
    pub freed_a: bool,
}

impl DrainBatchUnderWay {
    /// The lockers and coordinator (unlock timeout 5 s): `late(i, nth)` is
    /// how late the `nth` unlock (from 0) of the `i`th other guard arrives
    /// at locker 0 once armed.
    pub fn new(
        seed: u64,
        late: impl Fn(usize, usize) -> std::time::Duration + Send + Sync + 'static,
    ) -> Self {
        use super::hooked::{connection_refused, Call};
        eprintln!("seed {seed}");
        let nodes = super::nodes(3);
        let down = Arc::new(AtomicBool::new(false));
        let late_uids: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
        let sends = std::sync::Mutex::new(std::collections::HashMap::<usize, usize>::new());
        let mut lockers: Vec<Arc<dyn NetLocker>> = super::as_lockers(&nodes);
        {
            let (refusing, armed) = (down.clone(), late_uids.clone());
            lockers[0] = Hooked::new(nodes[0].clone())
                .refusing(move |call, _| {
                    (call == Call::Unlock && refusing.load(Ordering::SeqCst))
                        .then(connection_refused)
                })
                .arriving_late(move |call, args| {
                    if call != Call::Unlock {
                        return None;
                    }
                    let armed = armed.lock().unwrap_or_else(|e| e.into_inner());
                    let i = armed.iter().position(|u| *u == *args.uid)?;
                    let mut sends = sends.lock().unwrap_or_else(|e| e.into_inner());
                    let nth = sends.entry(i).or_default();
                    *nth += 1;
                    Some(late(i, *nth - 1))
                })
                .shared();
        }
        let ds = super::with_timeouts(
            lockers,
            seed,
            Timeouts {
                unlock: std::time::Duration::from_secs(5),
                ..Timeouts::default()
            },
        );
        DrainBatchUnderWay {
            nodes,
            ds,
            down,
            late_uids,
        }
    }

    /// On the current (paused) runtime: takes "a" and `others`, drops "a"
    /// while locker 0 refuses unlocks (its release gives up its inline
    /// retries and queues the unlock), then the others; arms their
    /// lateness, lets locker 0 take unlocks again, and waits (60 s at
    /// most) until the drain task's probe, "a"'s unlock, landed there.
    pub async fn run(&self, others: &[&str]) -> ProbeLanded {
        use std::time::Duration;
        let a = super::try_lock(&self.ds, "a").await;
        let mut guards = Vec::new();
        for name in others {
            guards.push(super::try_lock(&self.ds, name).await);
        }
        let ua = a.uid().to_owned();
        let uids: Vec<String> = guards.iter().map(|g| g.uid().to_owned()).collect();
        self.down.store(true, Ordering::SeqCst);
        drop(a);
        tokio::time::sleep(Duration::from_secs(6)).await;
        drop(guards);
        tokio::time::sleep(Duration::from_secs(6)).await;
        *self.late_uids.lock().unwrap_or_else(|e| e.into_inner()) = uids.clone();
        self.down.store(false, Ordering::SeqCst);
        let freed_a = tokio::time::timeout(Duration::from_secs(60), async {
            while super::holds(&self.nodes[0], &ua) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await
        .is_ok();
        ProbeLanded {
            a: ua,
            others: uids,
            freed_a,
        }
    }
}

/// The scene of a resign sent again: `l` leads election "e" on `cluster`'s
/// three lockers (campaigned on runtime `r1`); lockers 0 and 1 are cut off
/// from l and a resign on `r1` is given up after 1 s, its unlocks to them
/// left on their way on `r1`, not driven after. Call D,
/// `finish_releases(8 s)` on runtime `p`, takes them back and sees them
/// fail; then `after_d` runs with `r1`; the cut heals and l resigns again
/// on `p`, answered at once by every locker. Asserts the controls, and
/// that call B, `finish_releases(0)` on `p` right after, owes nothing.
#[cfg(feature = "testing")]
pub fn a_resign_sent_again_leaves_nothing_owed(
    cluster: &quorum_lock::testing::TestCluster,
    l: &Dsync,
    after_d: impl FnOnce(&tokio::runtime::Runtime),
) {
    use quorum_lock::Error;
    use std::time::Duration;
    let r1 = super::paused_runtime();
    let (mut leading, first) = r1.block_on(async {
        let mut leading = tokio::time::timeout(
            Duration::from_secs(5),
            l.election("e").unwrap().campaign(b"l".to_vec()),
        )
        .await
        .expect("in time")
        .expect("l leads");
        cluster.partition("l", &[0, 1]).unwrap();
        // Given up after 1 s: its unlocks to lockers 0 and 1 are left on
        // their way on r1.
        let first = tokio::time::timeout(Duration::from_secs(1), leading.resign()).await;
        (leading, first.is_err())
    });
    let p = super::paused_runtime();
    let d = p.block_on(l.finish_releases(Duration::from_secs(8)));
    after_d(&r1);
    cluster.heal_partition("l", &[0, 1]).unwrap();
    let (second, entries, b) = p.block_on(async {
        let second = tokio::time::timeout(Duration::from_secs(30), leading.resign())
            .await
            .expect("in time");
        let entries = cluster.total_entries();
        let b = l.finish_releases(Duration::ZERO).await;
        (second, entries, b)
    });
    eprintln!(
        "first resign given up: {first}; D gave {d:?}; second resign {second:?}; entries left \
         {entries}; B gave {b:?}"
    );
    assert!(
        first,
        "control: the first resign was still waiting after 1 s"
    );
    assert!(
        matches!(d, Err(Error::ReleasesPending { .. })),
        "control: D's copies to lockers 0 and 1 failed"
    );
    assert!(
        second.is_ok(),
        "control: every locker confirmed the second resign"
    );
    assert_eq!(entries, 0, "control: no locker holds anything");
    assert!(
        matches!(b, Ok(()) | Err(Error::ReleasesPending { pending: 0, .. })),
        "nothing is owed (the resign sent again landed on every locker, so the copies D saw \
         fail are moot), yet B returned {b:?}"
    );
    drop(leading);
    drop(r1);
}
