//! A `NetLocker` around another whose calls a test can refuse, slow down
//! or cut off by what they are, and which can stand for a locker of another
//! name or of a smaller implementation, so that scenario tests need not
//! each write out the whole trait to change one call.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use quorum_lock::{
    Error, LockArgs, LockInfo, LockMode, NetLocker, Proclamation, WaitArgs, WaitReply, WatchArgs,
};

/// Where a late call spends its delay: on its way to the locker, or on its
/// answer's way back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Late {
    Arriving,
    Replying,
}

/// Which call a hook is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Lock,
    RLock,
    LockWait,
    Fence,
    Proclaim,
    Leader,
    Unlock,
    RUnlock,
    Refresh,
    ForceUnlock,
    /// The listing of locks: asked of [`Hooked::cut_while`] only (with no
    /// arguments).
    Locks,
}

impl Call {
    /// Whether a locker in quarantine refuses this call: all but releases
    /// and refreshes.
    pub fn is_grant(self) -> bool {
        !matches!(
            self,
            Call::Unlock | Call::RUnlock | Call::Refresh | Call::ForceUnlock | Call::Locks
        )
    }
}

/// What a locker may leave out of the `NetLocker` trait: a wrapper
/// [`Hooked::lacking`] one answers it as the trait does by default, as a
/// locker of an older or smaller implementation would (its defaults that
/// make other calls make them through the wrapper, hooks and all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Optional {
    RefreshMode,
    LockWait,
    Queues,
    Fence,
    Proclaim,
    Leader,
    Locks,
    Validity,
}

impl Optional {
    /// Everything a locker may leave out: a locker of the first protocol
    /// generation.
    pub const ALL: [Optional; 8] = [
        Optional::RefreshMode,
        Optional::LockWait,
        Optional::Queues,
        Optional::Fence,
        Optional::Proclaim,
        Optional::Leader,
        Optional::Locks,
        Optional::Validity,
    ];
}

type Cut = dyn Fn(Call, Option<&LockArgs>) -> bool + Send + Sync;
type Lose = dyn Fn(Call, &LockArgs) -> bool + Send + Sync;
type Refuse = dyn Fn(Call, &LockArgs) -> Option<Error> + Send + Sync;
type Delay = dyn Fn(Call, &LockArgs) -> Option<Duration> + Send + Sync;
type First = dyn Fn(Call, &LockArgs) -> Option<Script> + Send + Sync;

/// What a call awaits first, written by a test: a timer, a channel
/// drained, another lock taken.
pub type Script = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// `inner`, with `cut` asked first of each call (one it cuts never
/// answers and never reaches `inner`), then `arrival_delay` (the call
/// spends that long on its way to `inner`), `refuse` (an error it gives is
/// the call's answer, and `inner` is not asked), and after `inner`
/// answered `lose` (a reply it loses never comes back) and `reply_delay` (the reply, already applied by `inner`, spends that long on the
/// way back). What it does not override it takes from `inner`.
pub struct Hooked {
    inner: Arc<dyn NetLocker>,
    cut: Box<Cut>,
    first: Box<First>,
    arrival_delay: Box<Delay>,
    refuse: Box<Refuse>,
    lose: Box<Lose>,
    reply_delay: Box<Delay>,
    lacking: Vec<Optional>,
    watches: bool,
    name: Option<String>,
    online: Option<bool>,
    local: Option<bool>,
}

impl Hooked {
    pub fn new(inner: Arc<dyn NetLocker>) -> Hooked {
        Hooked {
            inner,
            cut: Box::new(|_, _| false),
            first: Box::new(|_, _| None),
            arrival_delay: Box::new(|_, _| None),
            refuse: Box::new(|_, _| None),
            lose: Box::new(|_, _| false),
            reply_delay: Box::new(|_, _| None),
            lacking: Vec::new(),
            watches: true,
            name: None,
            online: None,
            local: None,
        }
    }

    /// Calls for which `cut` says true when they come never answer, as
    /// those of a holder whose network (or process) stopped.
    pub fn cut_while(
        mut self,
        cut: impl Fn(Call, Option<&LockArgs>) -> bool + Send + Sync + 'static,
    ) -> Hooked {
        self.cut = Box::new(cut);
        self
    }

    /// Calls for which `first` gives a script await it before anything
    /// else is asked of them (after a cut); dropped with the call.
    pub fn awaiting_first(
        mut self,
        first: impl Fn(Call, &LockArgs) -> Option<Script> + Send + Sync + 'static,
    ) -> Hooked {
        self.first = Box::new(first);
        self
    }

    /// Calls reach `inner` as late as `delay` says when they come (and are
    /// dropped with the caller's wait before they do); a test may count
    /// them here too.
    pub fn arriving_late(
        mut self,
        delay: impl Fn(Call, &LockArgs) -> Option<Duration> + Send + Sync + 'static,
    ) -> Hooked {
        self.arrival_delay = Box::new(delay);
        self
    }

    /// Answers `calls` as the trait does by default.
    pub fn lacking(mut self, calls: &[Optional]) -> Hooked {
        self.lacking = calls.to_vec();
        self
    }

    /// Reads of the leader pass on no watch: the locker never pushes.
    pub fn without_watches(mut self) -> Hooked {
        self.watches = false;
        self
    }

    /// Its endpoint is `name` instead of `inner`'s.
    pub fn named(mut self, name: impl Into<String>) -> Hooked {
        self.name = Some(name.into());
        self
    }

    /// Says it is online when `online` (and not otherwise), whatever
    /// `inner` says.
    pub fn online(mut self, online: bool) -> Hooked {
        self.online = Some(online);
        self
    }

    /// Says it is local when `local` (and not otherwise), whatever `inner`
    /// says.
    pub fn local(mut self, local: bool) -> Hooked {
        self.local = Some(local);
        self
    }

    pub fn refusing(
        mut self,
        refuse: impl Fn(Call, &LockArgs) -> Option<Error> + Send + Sync + 'static,
    ) -> Hooked {
        self.refuse = Box::new(refuse);
        self
    }

    /// Unlocks are refused ([`connection_refused`], retryable) while
    /// `down` is set. Replaces the refusal hook.
    pub fn unlocks_refused_while(self, down: Arc<AtomicBool>) -> Hooked {
        self.refusing(move |call, _| {
            (call == Call::Unlock && down.load(Ordering::SeqCst)).then(connection_refused)
        })
    }

    /// Replies for which `lose` says true once `inner` answered never come
    /// back (the call was applied).
    pub fn losing_replies(
        mut self,
        lose: impl Fn(Call, &LockArgs) -> bool + Send + Sync + 'static,
    ) -> Hooked {
        self.lose = Box::new(lose);
        self
    }

    /// Unlocks are `delay` late while `slow` is set: on their way to
    /// `inner` (`Late::Arriving`: dropped with the caller's wait before
    /// they land) or on their answer's way back (`Late::Replying`: already
    /// applied). Replaces the hook of that kind.
    pub fn unlocks_late_while(self, slow: Arc<AtomicBool>, late: Late, delay: Duration) -> Hooked {
        let hook = move |call: Call, _: &LockArgs| {
            (call == Call::Unlock && slow.load(Ordering::SeqCst)).then_some(delay)
        };
        match late {
            Late::Arriving => self.arriving_late(hook),
            Late::Replying => self.replying_late(hook),
        }
    }

    pub fn replying_late(
        mut self,
        delay: impl Fn(Call, &LockArgs) -> Option<Duration> + Send + Sync + 'static,
    ) -> Hooked {
        self.reply_delay = Box::new(delay);
        self
    }

    pub fn shared(self) -> Arc<dyn NetLocker> {
        Arc::new(self)
    }

    async fn run<T>(
        &self,
        call: Call,
        args: &LockArgs,
        inner: impl std::future::Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        if (self.cut)(call, Some(args)) {
            std::future::pending::<()>().await;
        }
        if let Some(first) = (self.first)(call, args) {
            first.await;
        }
        if let Some(delay) = (self.arrival_delay)(call, args) {
            tokio::time::sleep(delay).await;
        }
        if let Some(err) = (self.refuse)(call, args) {
            return Err(err);
        }
        let reply = inner.await;
        if (self.lose)(call, args) {
            std::future::pending::<()>().await;
        }
        if let Some(delay) = (self.reply_delay)(call, args) {
            tokio::time::sleep(delay).await;
        }
        reply
    }

    fn lacks(&self, call: Optional) -> bool {
        self.lacking.contains(&call)
    }
}

/// A [`Hooked`] seen through the required calls only, so that the trait's
/// defaults answer what it lacks.
struct Required<'a>(&'a Hooked);

#[async_trait]
impl NetLocker for Required<'_> {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.0.lock(args).await
    }
    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.0.rlock(args).await
    }
    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.0.unlock(args).await
    }
    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.0.runlock(args).await
    }
    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        self.0.refresh(args).await
    }
    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.0.force_unlock(args).await
    }
    fn endpoint(&self) -> String {
        self.0.endpoint()
    }
    fn is_online(&self) -> bool {
        self.0.is_online()
    }
    fn is_local(&self) -> bool {
        self.0.is_local()
    }
}

#[async_trait]
impl NetLocker for Hooked {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.run(Call::Lock, args, self.inner.lock(args)).await
    }
    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.run(Call::RLock, args, self.inner.rlock(args)).await
    }
    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.run(Call::Unlock, args, self.inner.unlock(args)).await
    }
    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.run(Call::RUnlock, args, self.inner.runlock(args))
            .await
    }
    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        self.run(Call::Refresh, args, self.inner.refresh(args))
            .await
    }
    async fn refresh_mode(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        if self.lacks(Optional::RefreshMode) {
            return Required(self).refresh_mode(args, mode).await;
        }
        self.run(Call::Refresh, args, self.inner.refresh_mode(args, mode))
            .await
    }
    async fn lock_wait(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error> {
        if self.lacks(Optional::LockWait) {
            return Required(self).lock_wait(args, mode, wait).await;
        }
        self.run(Call::LockWait, args, self.inner.lock_wait(args, mode, wait))
            .await
    }
    fn queues(&self) -> bool {
        !self.lacks(Optional::Queues) && self.inner.queues()
    }
    async fn fence(
        &self,
        args: &LockArgs,
        mode: LockMode,
        floor: u64,
    ) -> Result<Option<u64>, Error> {
        if self.lacks(Optional::Fence) {
            return Required(self).fence(args, mode, floor).await;
        }
        self.run(Call::Fence, args, self.inner.fence(args, mode, floor))
            .await
    }
    async fn proclaim(&self, args: &LockArgs, proclamation: &Proclamation) -> Result<bool, Error> {
        if self.lacks(Optional::Proclaim) {
            return Required(self).proclaim(args, proclamation).await;
        }
        self.run(
            Call::Proclaim,
            args,
            self.inner.proclaim(args, proclamation),
        )
        .await
    }
    async fn leader(
        &self,
        args: &LockArgs,
        watch: Option<&WatchArgs>,
    ) -> Result<Option<Proclamation>, Error> {
        if self.lacks(Optional::Leader) {
            return Required(self).leader(args, watch).await;
        }
        let watch = watch.filter(|_| self.watches);
        self.run(Call::Leader, args, self.inner.leader(args, watch))
            .await
    }
    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.run(Call::ForceUnlock, args, self.inner.force_unlock(args))
            .await
    }
    async fn locks(&self) -> Result<Vec<LockInfo>, Error> {
        if self.lacks(Optional::Locks) {
            return Required(self).locks().await;
        }
        if (self.cut)(Call::Locks, None) {
            std::future::pending::<()>().await;
        }
        self.inner.locks().await
    }
    fn endpoint(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.inner.endpoint())
    }
    fn is_online(&self) -> bool {
        self.online.unwrap_or_else(|| self.inner.is_online())
    }
    fn is_local(&self) -> bool {
        self.local.unwrap_or_else(|| self.inner.is_local())
    }
    fn validity(&self) -> Option<Duration> {
        if self.lacks(Optional::Validity) {
            return None;
        }
        self.inner.validity()
    }
}

/// What a locker whose connection is refused answers: retryable.
pub fn connection_refused() -> Error {
    Error::LockerUnavailable {
        endpoint: "node-0".into(),
        reason: "connection refused".into(),
    }
}
