//! A `NetLocker` around another whose calls a test can refuse or slow down
//! by what they are, so that scenario tests need not each write out the
//! whole trait to change one call.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use quorum_lock::{
    Error, LockArgs, LockInfo, LockMode, NetLocker, Proclamation, WaitArgs, WaitReply, WatchArgs,
};

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
}

impl Call {
    /// Whether a locker in quarantine refuses this call: all but releases
    /// and refreshes.
    pub fn is_grant(self) -> bool {
        !matches!(
            self,
            Call::Unlock | Call::RUnlock | Call::Refresh | Call::ForceUnlock
        )
    }
}

type Refuse = dyn Fn(Call, &LockArgs) -> Option<Error> + Send + Sync;
type Delay = dyn Fn(Call, &LockArgs) -> Option<Duration> + Send + Sync;

/// `inner`, with `refuse` asked before each call (an error it gives is the
/// call's answer, and `inner` is not asked) and `reply_delay` after (the
/// reply, already applied by `inner`, spends that long on the way back).
pub struct Hooked {
    inner: Arc<dyn NetLocker>,
    refuse: Box<Refuse>,
    reply_delay: Box<Delay>,
}

impl Hooked {
    pub fn new(inner: Arc<dyn NetLocker>) -> Hooked {
        Hooked {
            inner,
            refuse: Box::new(|_, _| None),
            reply_delay: Box::new(|_, _| None),
        }
    }

    pub fn refusing(
        mut self,
        refuse: impl Fn(Call, &LockArgs) -> Option<Error> + Send + Sync + 'static,
    ) -> Hooked {
        self.refuse = Box::new(refuse);
        self
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
        if let Some(err) = (self.refuse)(call, args) {
            return Err(err);
        }
        let reply = inner.await;
        if let Some(delay) = (self.reply_delay)(call, args) {
            tokio::time::sleep(delay).await;
        }
        reply
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
        self.run(Call::Refresh, args, self.inner.refresh_mode(args, mode))
            .await
    }
    async fn lock_wait(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error> {
        self.run(Call::LockWait, args, self.inner.lock_wait(args, mode, wait))
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
        self.run(Call::Fence, args, self.inner.fence(args, mode, floor))
            .await
    }
    async fn proclaim(&self, args: &LockArgs, proclamation: &Proclamation) -> Result<bool, Error> {
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
        self.run(Call::Leader, args, self.inner.leader(args, watch))
            .await
    }
    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.run(Call::ForceUnlock, args, self.inner.force_unlock(args))
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
