//! How a call goes through a `FaultyLocker`: decided when it starts, then
//! delayed, lost, silenced by a crash, or forwarded.

use std::future::{pending, Future};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use super::plan::{Plan, State};
use super::{CallKind, FaultyLocker};
use crate::{
    Error, ImmediateLocker, LockArgs, LockInfo, LockMode, NetLocker, Proclamation, PushEvent,
    PushSink, WaitArgs, WaitReply, Wake, WatchArgs,
};

type Reply<'a, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'a>>;

/// Carries a node's pushes to a waiter through the node's faults: a push
/// from a node that is down, hanging or cut off from the waiter is lost, a
/// push whose reply would be dropped is lost, and latency delays it.
struct FaultyPush {
    state: Arc<Mutex<State>>,
    owner: Arc<str>,
    wake: Wake,
}

impl PushSink for FaultyPush {
    fn push(&self, _slot: usize, uid: &str, event: PushEvent) {
        let plan = self
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .plan(&self.owner);
        match plan {
            Plan::Hang(why) => tracing::trace!(uid, ?event, why, "injected: push lost"),
            Plan::Refuse => tracing::trace!(uid, ?event, "injected: push refused"),
            Plan::Forward { drop: Some(_), .. } => {
                tracing::trace!(uid, ?event, "injected: push lost")
            }
            Plan::Forward {
                delay: Some(delay), ..
            } => {
                let (wake, uid) = (self.wake.clone(), uid.to_owned());
                match tokio::runtime::Handle::try_current() {
                    Ok(handle) => {
                        handle.spawn(async move {
                            tokio::time::sleep(delay).await;
                            wake.notify(&uid, event);
                        });
                    }
                    Err(_) => wake.notify(&uid, event),
                }
            }
            Plan::Forward { .. } => self.wake.notify(uid, event),
        }
    }
}

impl FaultyLocker {
    /// `wait` with its pushes sent through this node's faults.
    fn faulty_wait(&self, args: &LockArgs, wait: &WaitArgs) -> WaitArgs {
        WaitArgs {
            wake: wait.wake.clone().map(|wake| {
                let push = FaultyPush {
                    state: self.state.clone(),
                    owner: args.owner.clone(),
                    wake,
                };
                Wake::new(Arc::new(push), 0)
            }),
            ..wait.clone()
        }
    }

    /// Never answers, like a request or reply lost on the network.
    async fn silence<T>(&self, kind: CallKind, why: &'static str) -> Result<T, Error> {
        self.counters.faulted(kind);
        tracing::trace!(locker = %self.inner.endpoint(), ?kind, why, "injected: no reply");
        pending().await
    }

    async fn call<'a, T>(
        &'a self,
        kind: CallKind,
        args: &LockArgs,
        forward: impl FnOnce() -> Reply<'a, T> + Send,
    ) -> Result<T, Error> {
        self.counters.seen(kind);
        let plan = self.state().plan(&args.owner);
        let (delay, drop, incarnation) = match plan {
            Plan::Hang(why) => return self.silence(kind, why).await,
            Plan::Refuse => {
                self.counters.faulted(kind);
                return Err(Error::LockerUnavailable {
                    endpoint: self.inner.endpoint(),
                    reason: crate::error::CONNECTION_REFUSED_INJECTED.into(),
                });
            }
            Plan::Forward {
                delay,
                drop,
                incarnation,
            } => (delay, drop, incarnation),
        };
        if drop == Some(false) {
            return self.silence(kind, "request lost").await;
        }
        if let Some(delay) = delay {
            self.counters.delayed(kind);
            tokio::time::sleep(delay).await;
            if !self.state().alive(incarnation) {
                return self.silence(kind, "crashed during latency").await;
            }
        }
        let reply = forward().await;
        // A generic inner locker may await: if the node died meanwhile, the
        // request may have been applied but no reply leaves a dead host.
        if !self.state().alive(incarnation) {
            return self.silence(kind, "crashed before replying").await;
        }
        if drop == Some(true) {
            return self.silence(kind, "reply lost").await;
        }
        reply
    }
}

#[async_trait]
impl NetLocker for FaultyLocker {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.call(CallKind::Lock, args, || self.inner.lock(args))
            .await
    }

    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.call(CallKind::RLock, args, || self.inner.rlock(args))
            .await
    }

    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.call(CallKind::Unlock, args, || self.inner.unlock(args))
            .await
    }

    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.call(CallKind::RUnlock, args, || self.inner.runlock(args))
            .await
    }

    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        self.call(CallKind::Refresh, args, || self.inner.refresh(args))
            .await
    }

    async fn refresh_mode(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        // Forwarded as is: the default method would drop the mode and with
        // it a restarted locker's re-grant.
        self.call(CallKind::Refresh, args, || {
            self.inner.refresh_mode(args, mode)
        })
        .await
    }

    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.call(CallKind::ForceUnlock, args, || {
            self.inner.force_unlock(args)
        })
        .await
    }

    async fn lock_wait(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error> {
        let kind = CallKind::lock_in(mode);
        let wait = self.faulty_wait(args, wait);
        self.call(kind, args, || {
            Box::pin(async move { self.inner.lock_wait(args, mode, &wait).await })
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
        self.call(CallKind::Fence, args, || {
            self.inner.fence(args, mode, floor)
        })
        .await
    }

    async fn proclaim(&self, args: &LockArgs, proclamation: &Proclamation) -> Result<bool, Error> {
        self.call(CallKind::Proclaim, args, || {
            self.inner.proclaim(args, proclamation)
        })
        .await
    }

    async fn leader(
        &self,
        args: &LockArgs,
        watch: Option<&WatchArgs>,
    ) -> Result<Option<Proclamation>, Error> {
        // The watch's pushes cross the same faults as a waiter's.
        let watch = watch.map(|watch| WatchArgs {
            ttl: watch.ttl,
            wake: Wake::new(
                Arc::new(FaultyPush {
                    state: self.state.clone(),
                    owner: args.owner.clone(),
                    wake: watch.wake.clone(),
                }),
                0,
            ),
        });
        self.call(CallKind::Leader, args, || {
            Box::pin(async move { self.inner.leader(args, watch.as_ref()).await })
        })
        .await
    }

    async fn locks(&self) -> Result<Vec<LockInfo>, Error> {
        // Listing is an operator's call outside the lock protocol; only a
        // node that is down fails it.
        if self.is_down() {
            return Err(Error::LockerUnavailable {
                endpoint: self.inner.endpoint(),
                reason: "the node is down (injected fault)".into(),
            });
        }
        self.inner.locks().await
    }

    fn endpoint(&self) -> String {
        self.inner.endpoint()
    }

    fn is_online(&self) -> bool {
        !self.is_down() && self.inner.is_online()
    }

    fn is_local(&self) -> bool {
        self.inner.is_local()
    }

    fn validity(&self) -> Option<std::time::Duration> {
        self.inner.validity()
    }

    // While no fault is in force a call would be forwarded at once, so an
    // inner locker that answers at once is offered as such: the coordinator
    // then takes its immediate path, and the randomized tests cover both
    // paths, this one between faults and the async one during them.
    fn immediate(&self) -> Option<&dyn ImmediateLocker> {
        let calm = self.state().calm();
        (calm && self.inner.immediate().is_some()).then_some(self as &dyn ImmediateLocker)
    }
}

impl FaultyLocker {
    /// A call made through [`ImmediateLocker`]: forwarded at once when the
    /// node is still calm. A fault that began since the coordinator asked
    /// for the immediate path (another thread crashed the node in between)
    /// cannot delay or swallow a plain function call, so the call fails as
    /// a refused connection does, without reaching the inner locker.
    fn call_now<T>(
        &self,
        kind: CallKind,
        args: &LockArgs,
        forward: impl FnOnce(&dyn ImmediateLocker) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.counters.seen(kind);
        let forwarded = matches!(
            self.state().plan(&args.owner),
            Plan::Forward {
                delay: None,
                drop: None,
                ..
            }
        );
        match self.inner.immediate() {
            Some(inner) if forwarded => forward(inner),
            _ => {
                self.counters.faulted(kind);
                Err(Error::LockerUnavailable {
                    endpoint: self.inner.endpoint(),
                    reason: "a fault began during the call (injected fault)".into(),
                })
            }
        }
    }
}

impl ImmediateLocker for FaultyLocker {
    fn lock_now(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        let kind = CallKind::lock_in(mode);
        self.call_now(kind, args, |inner| inner.lock_now(args, mode))
    }

    fn unlock_now(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        let kind = CallKind::unlock_in(mode);
        self.call_now(kind, args, |inner| inner.unlock_now(args, mode))
    }

    fn refresh_now(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        self.call_now(CallKind::Refresh, args, |inner| {
            inner.refresh_now(args, mode)
        })
    }

    fn lock_wait_now(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error> {
        let kind = CallKind::lock_in(mode);
        let wait = self.faulty_wait(args, wait);
        self.call_now(kind, args, |inner| inner.lock_wait_now(args, mode, &wait))
    }
}
