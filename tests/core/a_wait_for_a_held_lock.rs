//! The scene of the tests of why a wait gave up (`lock_timeout_held_elsewhere_*`,
//! `lock_timeout_with_queueing_lockers_*`): a client "holder" holds "res",
//! the client "h" waits for it with a deadline while its other calls go
//! astray, and the test reads what `waiting()` says at given moments and
//! how the wait ended. Paused time: every moment is counted from `start`.
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{
    DRWMutex, Dsync, Error, LocalLocker, LockArgs, LockMode, NetLocker, Timeouts, WaitArgs,
    WaitReply, WaitStatus, WriteGuard,
};
use tokio::task::JoinHandle;
use tokio::time::{sleep, sleep_until, Instant};

use crate::common;

/// Answers in 1 ms.
pub const FAST: Latency = Latency::Fixed(Duration::from_millis(1));

/// Sleeps until `ms` after `start` (at once when that has passed).
pub async fn until(start: Instant, ms: u64) {
    sleep(Duration::from_millis(ms).saturating_sub(start.elapsed())).await;
}

/// A `TestCluster` of lockers that answer in `latency`, and its two
/// clients: "holder" (choices drawn from `seed`) and "h" (from `seed + 1`).
pub struct Scene {
    pub cluster: TestCluster,
    pub holder: Dsync,
    pub h: Dsync,
    pub start: Instant,
    pub latency: Latency,
}

impl Scene {
    /// `n` lockers answering in 1 ms.
    pub fn new(n: usize, seed: u64) -> Scene {
        Scene::answering_in(n, seed, FAST)
    }

    /// `n` lockers answering in `latency`.
    pub fn answering_in(n: usize, seed: u64, latency: Latency) -> Scene {
        eprintln!("seed {seed}");
        let cluster = TestCluster::new(n, seed);
        let all: Vec<usize> = (0..n).collect();
        cluster.set_latency(latency, &all).unwrap();
        let holder = common::seeded(cluster.net_lockers(), "holder", seed);
        let h = common::seeded(cluster.net_lockers(), "h", seed + 1);
        Scene {
            cluster,
            holder,
            h,
            start: Instant::now(),
            latency,
        }
    }

    /// The holder takes "res".
    pub async fn hold(&self) -> WriteGuard {
        self.holder.rw_mutex(["res"]).unwrap().lock().await.unwrap()
    }

    /// The holder takes "res", then the client's lockers answer it once
    /// (in 1 ms), so that they have answered it before.
    pub async fn hold_and_warm(&self) -> WriteGuard {
        let held = self.hold().await;
        warm(&self.h).await;
        held
    }

    /// `nodes` healed and answering in the scene's latency again.
    pub fn heal(&self, nodes: &[usize]) {
        self.cluster.heal(nodes).unwrap();
        self.cluster.set_latency(self.latency, nodes).unwrap();
    }

    /// At 10 ms a force-unlock of "other" whose replies from nodes 1 and
    /// 2 are lost (it times out in the background at ~5010 ms); nodes 1
    /// and 2 healed 5 ms later.
    pub async fn lose_a_force_unlock(&self) -> JoinHandle<Result<usize, Error>> {
        until(self.start, 10).await;
        self.cluster.drop_replies(1.0, false, &[1, 2]).unwrap();
        let lost = spawn_force_unlock(&self.h, "other");
        sleep(Duration::from_millis(5)).await;
        self.heal(&[1, 2]);
        lost
    }

    /// At `ms`, the client's wait for "res" with `deadline`, as a task of
    /// its own; and its mutex.
    pub async fn wait_at(
        &self,
        ms: u64,
        deadline: Duration,
    ) -> (DRWMutex, JoinHandle<Result<(), Error>>) {
        until(self.start, ms).await;
        self.wait_now(deadline)
    }

    /// The client's wait for "res" with `deadline`, as a task of its own;
    /// and its mutex.
    pub fn wait_now(&self, deadline: Duration) -> (DRWMutex, JoinHandle<Result<(), Error>>) {
        let mutex = self.h.rw_mutex(["res"]).unwrap();
        let wait = common::spawn_lock_timeout(&mutex, deadline);
        (mutex, wait)
    }

    /// What the wait on `mutex` says at `ms`, printed.
    pub async fn status_at(&self, mutex: &DRWMutex, ms: u64) -> Option<WaitStatus> {
        status_at(mutex, self.start, ms).await
    }

    /// How the wait ended (at most 5 s from now), printed.
    pub async fn gave_up(&self, wait: JoinHandle<Result<(), Error>>) -> Result<(), Error> {
        gave_up(wait, self.start).await
    }
}

/// Four lockers answering in 1 ms; "res" held on nodes 0, 2 and 3 (node 1
/// was cut off from the holder). At 200 ms the client waits for it with a
/// deadline of 300 ms; at 210 ms it takes and drops a read lock on
/// "other" (`in_line`: `read()`, else `try_read()`) whose replies from
/// nodes 2 and 3 are lost, and they are healed 5 ms later. Returns what
/// `waiting()` said at 205 ms and at 400 ms, and how the wait ended.
pub async fn wait_beside_stragglers_of_a_read(
    seed: u64,
    in_line: bool,
) -> (Option<WaitStatus>, Option<WaitStatus>, Result<(), Error>) {
    let scene = Scene::new(4, seed);
    scene.cluster.partition("holder", &[1]).unwrap();
    let _held = scene.hold_and_warm().await;
    let (mutex, wait) = scene.wait_at(200, Duration::from_millis(300)).await;
    let queued = scene.status_at(&mutex, 205).await;
    until(scene.start, 210).await;
    scene.cluster.drop_replies(1.0, false, &[2, 3]).unwrap();
    let other = scene.h.rw_mutex(["other"]).unwrap();
    let read = if in_line {
        tokio::time::timeout(Duration::from_millis(50), other.read()).await
    } else {
        tokio::time::timeout(Duration::from_millis(50), other.try_read()).await
    }
    .expect("a read quorum answers in 1 ms");
    eprintln!(
        "at {:?}: try_read of \"other\": {:?}",
        scene.start.elapsed(),
        read.as_ref().map(|_| "granted")
    );
    drop(read);
    sleep(Duration::from_millis(5)).await;
    scene.heal(&[2, 3]);
    let status = scene.status_at(&mutex, 400).await;
    let result = scene.gave_up(wait).await;
    (queued, status, result)
}

/// `h` takes and releases "warm", so that its lockers have answered it
/// before.
pub async fn warm(h: &Dsync) {
    let _ = h
        .rw_mutex(["warm"])
        .unwrap()
        .lock()
        .await
        .unwrap()
        .unlock()
        .await;
}

/// What the wait on `mutex` says at `ms` after `start`, printed.
pub async fn status_at(mutex: &DRWMutex, start: Instant, ms: u64) -> Option<WaitStatus> {
    until(start, ms).await;
    let status = mutex.waiting();
    eprintln!(
        "at {:?}: {:?}",
        start.elapsed(),
        status.as_ref().map(|s| s.to_string())
    );
    status
}

/// How the wait ended (at most 5 s from now), printed.
pub async fn gave_up(wait: JoinHandle<Result<(), Error>>, start: Instant) -> Result<(), Error> {
    let result = common::ended(wait).await;
    eprintln!("gave up at {:?} with: {result:?}", start.elapsed());
    result
}

/// `h.force_unlock([name])` as a task of its own.
pub fn spawn_force_unlock(h: &Dsync, name: &str) -> JoinHandle<Result<usize, Error>> {
    let (admin, name) = (h.clone(), name.to_owned());
    tokio::spawn(async move { admin.force_unlock([name]).await })
}

/// What a [`LateForceUnlocks`] locker does with a force-unlock of a name.
#[derive(Debug, Clone, Copy)]
pub enum Late {
    /// Fails with its connection reset this long after it is asked.
    ResetAfter(Duration),
    /// Fails with its connection reset this long after the locker's
    /// `start`, noted a moment after the other failures of that instant
    /// when `behind`.
    ResetAt { at: Duration, behind: bool },
    /// Never answers.
    Never,
}

/// A locker whose force-unlocks of some names fail late, as calls whose
/// connection dropped under them do, or never answer (`answers` tells
/// which); every other call goes to `inner`.
pub struct LateForceUnlocks {
    pub inner: Arc<LocalLocker>,
    pub name: String,
    pub start: Instant,
    pub answers: fn(&str) -> Option<Late>,
}

/// Three in-process lockers, nodes 1 and 2 behind [`LateForceUnlocks`]
/// with `answers`, and their two clients: "holder" (choices drawn from
/// `seed`) and "h" (from `seed + 1`; force-unlocks cut at 1 s, waits
/// re-checked every 5 s). Returns them and when they were made.
pub fn late_force_unlocks(seed: u64, answers: fn(&str) -> Option<Late>) -> (Dsync, Dsync, Instant) {
    eprintln!("seed {seed}");
    let start = Instant::now();
    let nodes: Vec<Arc<LocalLocker>> = (0..3).map(|_| Arc::new(LocalLocker::new())).collect();
    let lockers: Vec<Arc<dyn NetLocker>> = nodes
        .iter()
        .enumerate()
        .map(|(i, node)| -> Arc<dyn NetLocker> {
            if i == 0 {
                node.clone()
            } else {
                Arc::new(LateForceUnlocks {
                    inner: node.clone(),
                    name: format!("node-{i}"),
                    start,
                    answers,
                })
            }
        })
        .collect();
    let holder = Dsync::builder(lockers.clone())
        .owner("holder")
        .rng_seed(seed)
        .build()
        .unwrap();
    let h = Dsync::builder(lockers)
        .owner("h")
        .rng_seed(seed + 1)
        .timeouts(Timeouts {
            force_unlock: Duration::from_secs(1),
            wait_recheck: Duration::from_secs(5),
            ..Timeouts::default()
        })
        .build()
        .unwrap();
    (holder, h, start)
}

#[async_trait]
impl NetLocker for LateForceUnlocks {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.lock(args).await
    }
    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.rlock(args).await
    }
    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.unlock(args).await
    }
    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.runlock(args).await
    }
    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.refresh(args).await
    }
    async fn refresh_mode(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        self.inner.refresh_mode(args, mode).await
    }
    async fn lock_wait(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error> {
        self.inner.lock_wait(args, mode, wait).await
    }
    fn queues(&self) -> bool {
        self.inner.queues()
    }
    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        let late = args
            .resources
            .iter()
            .find_map(|name| (self.answers)(name).map(|late| (name, late)));
        let Some((name, late)) = late else {
            return self.inner.force_unlock(args).await;
        };
        match late {
            Late::ResetAfter(after) => sleep(after).await,
            Late::ResetAt { at, behind } => {
                sleep_until(self.start + at).await;
                if behind {
                    tokio::task::yield_now().await;
                }
            }
            Late::Never => std::future::pending::<()>().await,
        }
        Err(Error::LockerUnavailable {
            endpoint: self.endpoint(),
            reason: format!("connection reset under {name} (test)"),
        })
    }
    fn endpoint(&self) -> String {
        self.name.clone()
    }
    fn is_online(&self) -> bool {
        true
    }
    fn is_local(&self) -> bool {
        false
    }
    fn validity(&self) -> Option<Duration> {
        self.inner.validity()
    }
}
