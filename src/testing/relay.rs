//! [`Relay`]: a locker seen through a link that the test steers call by
//! call, for the faults [`FaultyLocker`](super::FaultyLocker) draws at
//! random but a test needs at one exact point: this proclamation lost,
//! that refresh delivered after the unlock that followed it.
//!
//! Invariants:
//! * every call of the [`NetLocker`] contract goes through the route, and
//!   only there; the relay answers nothing itself (it has no
//!   [`immediate`](NetLocker::immediate) path that would skip the route);
//! * a call routed [`Late`](Route::Late) reaches the locker even when the
//!   caller stops waiting for it, as a message already on the wire does;
//!   one routed [`Lost`](Route::Lost) never reaches it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::CallKind;
use crate::{
    Error, LockArgs, LockInfo, LockMode, NetLocker, Proclamation, WaitArgs, WaitReply, WatchArgs,
};

/// What a [`Relay`] does with one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Passes it on at once.
    Forward,
    /// Loses it: the locker never sees it, and the caller gets
    /// [`Error::LockerUnavailable`] with this reason.
    Lost(String),
    /// Delivers it this much later, from a task of its own: it reaches the
    /// locker even if the caller stops waiting, and the caller gets the
    /// locker's answer once it arrives.
    Late(Duration),
    /// Passes it on at once and hands the answer back this much later; a
    /// caller that stops waiting meanwhile never gets it.
    SlowReply(Duration),
}

type RouteFn = dyn Fn(CallKind, &LockArgs) -> Route + Send + Sync;

/// Forwards every call to an inner locker the way its route says: see
/// [`Route`]. The route sees each call's kind and arguments, and may keep
/// counts or read switches the test flips.
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// use quorum_lock::testing::{CallKind, Relay, Route};
/// use quorum_lock::{LocalLocker, NetLocker};
///
/// let cut = Arc::new(AtomicBool::new(false));
/// let switch = cut.clone();
/// // Proclamations are lost while `cut` is set; everything else passes.
/// let relay = Relay::new(Arc::new(LocalLocker::new()), move |kind, _args| {
///     if kind == CallKind::Proclaim && switch.load(Ordering::SeqCst) {
///         Route::Lost("the proclamation was lost".into())
///     } else {
///         Route::Forward
///     }
/// });
/// let locker: Arc<dyn NetLocker> = Arc::new(relay);
/// cut.store(true, Ordering::SeqCst);
/// # let _ = locker;
/// ```
pub struct Relay {
    inner: Arc<dyn NetLocker>,
    route: Box<RouteFn>,
}

impl Relay {
    /// A relay to `inner` along `route`.
    pub fn new(
        inner: Arc<dyn NetLocker>,
        route: impl Fn(CallKind, &LockArgs) -> Route + Send + Sync + 'static,
    ) -> Relay {
        Relay {
            inner,
            route: Box::new(route),
        }
    }

    /// The locker behind the relay.
    pub fn inner(&self) -> &Arc<dyn NetLocker> {
        &self.inner
    }

    /// Takes `call` (which owns what it sends) along the route of `kind`.
    async fn pass<T: Send + 'static>(
        &self,
        kind: CallKind,
        args: &LockArgs,
        call: impl Future<Output = Result<T, Error>> + Send + 'static,
    ) -> Result<T, Error> {
        match (self.route)(kind, args) {
            Route::Forward => call.await,
            Route::Lost(reason) => Err(Error::LockerUnavailable {
                endpoint: self.inner.endpoint(),
                reason,
            }),
            Route::Late(delay) => {
                let delivery = tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    call.await
                });
                delivery.await.unwrap_or_else(|_| {
                    Err(Error::LockerUnavailable {
                        endpoint: self.inner.endpoint(),
                        reason: "the late delivery ended with its runtime".into(),
                    })
                })
            }
            Route::SlowReply(delay) => {
                let answer = call.await;
                tokio::time::sleep(delay).await;
                answer
            }
        }
    }
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("inner", &self.inner.endpoint())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl NetLocker for Relay {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        let (inner, owned) = (self.inner.clone(), args.clone());
        self.pass(
            CallKind::Lock,
            args,
            async move { inner.lock(&owned).await },
        )
        .await
    }

    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        let (inner, owned) = (self.inner.clone(), args.clone());
        self.pass(
            CallKind::RLock,
            args,
            async move { inner.rlock(&owned).await },
        )
        .await
    }

    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        let (inner, owned) = (self.inner.clone(), args.clone());
        self.pass(
            CallKind::Unlock,
            args,
            async move { inner.unlock(&owned).await },
        )
        .await
    }

    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        let (inner, owned) = (self.inner.clone(), args.clone());
        self.pass(CallKind::RUnlock, args, async move {
            inner.runlock(&owned).await
        })
        .await
    }

    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        let (inner, owned) = (self.inner.clone(), args.clone());
        self.pass(CallKind::Refresh, args, async move {
            inner.refresh(&owned).await
        })
        .await
    }

    async fn refresh_mode(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        let (inner, owned) = (self.inner.clone(), args.clone());
        self.pass(CallKind::Refresh, args, async move {
            inner.refresh_mode(&owned, mode).await
        })
        .await
    }

    async fn lock_wait(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error> {
        let (inner, owned, wait) = (self.inner.clone(), args.clone(), wait.clone());
        self.pass(CallKind::lock_in(mode), args, async move {
            inner.lock_wait(&owned, mode, &wait).await
        })
        .await
    }

    fn queues(&self) -> bool {
        self.inner.queues()
    }

    async fn fence(
        &self,
        args: &LockArgs,
        mode: LockMode,
        floor: u64,
    ) -> Result<Option<u64>, Error> {
        let (inner, owned) = (self.inner.clone(), args.clone());
        self.pass(CallKind::Fence, args, async move {
            inner.fence(&owned, mode, floor).await
        })
        .await
    }

    async fn proclaim(&self, args: &LockArgs, proclamation: &Proclamation) -> Result<bool, Error> {
        let (inner, owned, proclamation) = (self.inner.clone(), args.clone(), proclamation.clone());
        self.pass(CallKind::Proclaim, args, async move {
            inner.proclaim(&owned, &proclamation).await
        })
        .await
    }

    async fn leader(
        &self,
        args: &LockArgs,
        watch: Option<&WatchArgs>,
    ) -> Result<Option<Proclamation>, Error> {
        let (inner, owned, watch) = (self.inner.clone(), args.clone(), watch.cloned());
        self.pass(CallKind::Leader, args, async move {
            inner.leader(&owned, watch.as_ref()).await
        })
        .await
    }

    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        let (inner, owned) = (self.inner.clone(), args.clone());
        self.pass(CallKind::ForceUnlock, args, async move {
            inner.force_unlock(&owned).await
        })
        .await
    }

    async fn locks(&self) -> Result<Vec<LockInfo>, Error> {
        self.inner.locks().await
    }

    fn endpoint(&self) -> String {
        self.inner.endpoint()
    }

    fn is_online(&self) -> bool {
        self.inner.is_online()
    }

    fn is_local(&self) -> bool {
        self.inner.is_local()
    }

    fn validity(&self) -> Option<Duration> {
        self.inner.validity()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::LocalLocker;

    fn args(uid: &str) -> LockArgs {
        LockArgs {
            uid: uid.into(),
            resources: vec!["x".to_owned()].into(),
            owner: "relay".into(),
            source: "relay".into(),
            quorum: 1,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn each_route_does_what_it_says() {
        let local = Arc::new(LocalLocker::new());
        let routed = Arc::new(AtomicUsize::new(0));
        let count = routed.clone();
        let relay = Relay::new(local.clone(), move |kind, args| {
            count.fetch_add(1, Ordering::SeqCst);
            match (kind, &*args.uid) {
                (CallKind::Lock, "lost") => Route::Lost("cut".into()),
                (CallKind::Lock, "late") => Route::Late(Duration::from_secs(5)),
                (CallKind::Unlock, _) => Route::SlowReply(Duration::from_secs(2)),
                _ => Route::Forward,
            }
        });
        let lost = relay.lock(&args("lost")).await;
        assert!(
            matches!(lost, Err(Error::LockerUnavailable { ref reason, .. }) if reason == "cut")
        );
        assert!(local.snapshot().is_empty(), "a lost call never arrives");
        // A late call arrives although its caller gave up on it.
        let gave_up = tokio::time::timeout(Duration::from_secs(1), relay.lock(&args("late"))).await;
        assert!(gave_up.is_err());
        assert!(local.snapshot().is_empty());
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(local.snapshot().len(), 1, "the late call arrived");
        // A slow reply: the locker acts at once, the caller hears later.
        let started = tokio::time::Instant::now();
        assert!(relay.unlock(&args("late")).await.unwrap());
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert!(local.snapshot().is_empty());
        assert_eq!(routed.load(Ordering::SeqCst), 3);
    }
}
