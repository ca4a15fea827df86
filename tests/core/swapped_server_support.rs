//! A locker endpoint whose server can be replaced by another one, as when
//! a lock server is restarted with another configuration (say without a
//! quarantine): the tests of waits that outlive such a restart share it.
#![cfg(feature = "testing")]

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use quorum_lock::{Error, LocalLocker, LockArgs, LockMode, NetLocker, Proclamation, WatchArgs};

/// Forwards every call to the table in place when the call is made.
pub(crate) struct Swap {
    endpoint: String,
    current: Mutex<Arc<LocalLocker>>,
}

impl Swap {
    pub(crate) fn new(endpoint: &str, table: LocalLocker) -> Self {
        Swap {
            endpoint: endpoint.to_owned(),
            current: Mutex::new(Arc::new(table)),
        }
    }

    fn table(&self) -> Arc<LocalLocker> {
        self.current.lock().unwrap().clone()
    }

    /// Puts `table` in place of the server behind the endpoint.
    pub(crate) fn replace(&self, table: LocalLocker) {
        *self.current.lock().unwrap() = Arc::new(table);
    }
}

#[async_trait]
impl NetLocker for Swap {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        NetLocker::lock(&*self.table(), args).await
    }
    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        NetLocker::rlock(&*self.table(), args).await
    }
    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        NetLocker::unlock(&*self.table(), args).await
    }
    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        NetLocker::runlock(&*self.table(), args).await
    }
    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        NetLocker::refresh(&*self.table(), args).await
    }
    async fn refresh_mode(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        NetLocker::refresh_mode(&*self.table(), args, mode).await
    }
    async fn fence(
        &self,
        args: &LockArgs,
        mode: LockMode,
        floor: u64,
    ) -> Result<Option<u64>, Error> {
        NetLocker::fence(&*self.table(), args, mode, floor).await
    }
    async fn proclaim(&self, args: &LockArgs, proclamation: &Proclamation) -> Result<bool, Error> {
        NetLocker::proclaim(&*self.table(), args, proclamation).await
    }
    async fn leader(
        &self,
        args: &LockArgs,
        watch: Option<&WatchArgs>,
    ) -> Result<Option<Proclamation>, Error> {
        NetLocker::leader(&*self.table(), args, watch).await
    }
    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        NetLocker::force_unlock(&*self.table(), args).await
    }
    fn endpoint(&self) -> String {
        self.endpoint.clone()
    }
    fn is_online(&self) -> bool {
        true
    }
    fn is_local(&self) -> bool {
        false
    }
}
