//! Reproduces a past break: a `try_lock` with one locker not honouring the lease and another down returned that locker's permanent lease error (`InvalidArgument`) instead of naming both lockers as down (`QuorumUnavailable`), while a wait in the same cluster gives up with `QuorumUnavailable`.
//!
//! docs/guarantees.md ("Settings cannot panic"): a server that announces a
//! shorter validity later "counts as a locker that is down, with that
//! message as the reason ... a wait goes on with the others and fails
//! with that message only when too few are left for a quorum". "Why a wait
//! waits": a `try_lock` that stops because grants can no longer make the
//! quorum says `WouldBlock` when the lock is held elsewhere "and otherwise
//! names its lockers as here" (`QuorumUnavailable`, "naming each locker
//! that did not answer and why, when too few lockers answer"). The rustdoc
//! of `DRWMutex::try_lock`: "with `Error::QuorumUnavailable` when too few
//! lockers answered".
//!
//! The scene: three lockers (write quorum 2). Locker 0 announces a 1 s
//! validity (shorter than x's 60 s lease) after x was built; locker 1 is
//! down (a transient failure); locker 2 grants. Two lockers are left that
//! x may count on, enough for a quorum once locker 1 is back, and
//! `lock_timeout` gives up with `QuorumUnavailable` naming both. x's
//! `try_lock` instead ends with the lease message as a non-retryable
//! `InvalidArgument`, as if the settings could never work.
//!
//! Suspected cause: src/lock/round.rs `Round::decide`, `Verdict::Unavailable`
//! arm: `else if let Some(err) = permanent { Err(err) }` returns the
//! permanent error of a single locker whenever the round is short of a
//! quorum, before `status.unavailable()`, where src/lock/wait_round.rs
//! `WaitRound::wait` returns it only when `left < quorum`.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::common::{self, Behaviour, FaultyLocker};
use quorum_lock::{Error, LocalLocker, LockArgs, LockMode, NetLocker};

const SEED: u64 = 42_401;

/// `inner`, announcing no validity until `announced` is set (the server
/// was offline when the client was built), then 1 s.
struct Announcing {
    inner: Arc<LocalLocker>,
    announced: Arc<AtomicBool>,
}

#[async_trait]
impl NetLocker for Announcing {
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
    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.force_unlock(args).await
    }
    fn endpoint(&self) -> String {
        "node-0".into()
    }
    fn is_online(&self) -> bool {
        true
    }
    fn is_local(&self) -> bool {
        true
    }
    fn validity(&self) -> Option<Duration> {
        self.announced
            .load(Ordering::SeqCst)
            .then_some(Duration::from_secs(1))
    }
}

#[tokio::test(start_paused = true)]
async fn try_lock_names_a_locker_not_honouring_the_lease_among_the_lockers_down_when_too_few_answer(
) {
    eprintln!("seed {SEED}");
    let announced = Arc::new(AtomicBool::new(false));
    let node1 = FaultyLocker::wrap(Arc::new(LocalLocker::named("node-1")));
    node1.set(Behaviour::Fail);
    let x = common::seeded(
        vec![
            Arc::new(Announcing {
                inner: Arc::new(LocalLocker::named("node-0")),
                announced: announced.clone(),
            }) as Arc<dyn NetLocker>,
            node1.clone(),
            Arc::new(LocalLocker::named("node-2")),
        ],
        "x",
        SEED,
    );
    announced.store(true, Ordering::SeqCst);
    let mutex = x.rw_mutex(["res"]).unwrap();

    let waited = tokio::time::timeout(
        Duration::from_secs(30),
        mutex.lock_timeout(Duration::from_secs(2)),
    )
    .await
    .expect("lock_timeout ends")
    .map(|_| ());
    eprintln!("x's lock_timeout: {waited:?}");
    let tried = tokio::time::timeout(Duration::from_secs(30), mutex.try_lock())
        .await
        .expect("try_lock ends")
        .map(|_| ());
    eprintln!("x's try_lock: {tried:?}");
    assert!(
        matches!(waited, Err(Error::QuorumUnavailable { .. })),
        "lock_timeout names both lockers down: {waited:?}"
    );
    assert!(
        matches!(tried, Err(Error::QuorumUnavailable { .. })),
        "try_lock must count locker 0 (not honouring the lease) as one locker down beside \
         locker 1 and say QuorumUnavailable, as lock_timeout does; it returned the lease \
         error as if the settings could never work: {tried:?}"
    );
}
