//! A locker that starts announcing a validity shorter than the lease, as
//! a lock server restarted with another setting does: for the scenes of a
//! locker that no longer honours the lease.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use quorum_lock::{
    Error, LockArgs, LockInfo, LockMode, NetLocker, Proclamation, WaitArgs, WaitReply, WatchArgs,
};

/// `inner`, announcing a validity of 1 s once `short` is set.
pub struct Shrinking {
    pub inner: Arc<dyn NetLocker>,
    pub short: Arc<AtomicBool>,
}

#[async_trait]
impl NetLocker for Shrinking {
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
    async fn fence(
        &self,
        args: &LockArgs,
        mode: LockMode,
        floor: u64,
    ) -> Result<Option<u64>, Error> {
        self.inner.fence(args, mode, floor).await
    }
    async fn proclaim(&self, args: &LockArgs, p: &Proclamation) -> Result<bool, Error> {
        self.inner.proclaim(args, p).await
    }
    async fn leader(
        &self,
        args: &LockArgs,
        watch: Option<&WatchArgs>,
    ) -> Result<Option<Proclamation>, Error> {
        self.inner.leader(args, watch).await
    }
    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.force_unlock(args).await
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
        if self.short.load(Ordering::SeqCst) {
            Some(Duration::from_secs(1))
        } else {
            self.inner.validity()
        }
    }
}
