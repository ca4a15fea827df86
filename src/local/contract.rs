//! How a `LocalLocker` answers the locker contract: its `NetLocker` calls,
//! and the same calls as plain functions (`ImmediateLocker`). Every call
//! is decided under the shards' locks without awaiting, so each is applied
//! entirely or not at all, whenever its future is dropped.

use std::time::Duration;

use async_trait::async_trait;

use super::LocalLocker;
use crate::locker::proclamation::{Proclamation, WatchArgs};
use crate::locker::wait::{WaitArgs, WaitReply};
use crate::{Error, ImmediateLocker, LockArgs, LockInfo, LockMode, NetLocker};

#[async_trait]
impl NetLocker for LocalLocker {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.grant(args, LockMode::Write)
    }

    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.grant(args, LockMode::Read)
    }

    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.release(args, Some(LockMode::Write))
    }

    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.release(args, Some(LockMode::Read))
    }

    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        self.refresh_entries(args, None)
    }

    async fn refresh_mode(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        self.refresh_entries(args, Some(mode))
    }

    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.force_unlock_as(args, true)
    }

    async fn lock_wait(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error> {
        self.grant_or_queue(args, mode, wait)
    }

    async fn fence(
        &self,
        args: &LockArgs,
        mode: LockMode,
        floor: u64,
    ) -> Result<Option<u64>, Error> {
        self.draw_fence(args, mode, floor)
    }

    async fn proclaim(&self, args: &LockArgs, proclamation: &Proclamation) -> Result<bool, Error> {
        self.store_proclamation(args, proclamation)
    }

    async fn leader(
        &self,
        args: &LockArgs,
        watch: Option<&WatchArgs>,
    ) -> Result<Option<Proclamation>, Error> {
        self.read_leader(args, watch)
    }

    async fn locks(&self) -> Result<Vec<LockInfo>, Error> {
        Ok(self.snapshot())
    }

    fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    fn is_online(&self) -> bool {
        true
    }

    fn is_local(&self) -> bool {
        true
    }

    fn validity(&self) -> Option<Duration> {
        Some(self.config.validity)
    }

    fn queues(&self) -> bool {
        true
    }

    fn immediate(&self) -> Option<&dyn ImmediateLocker> {
        Some(self)
    }
}

/// Every call of a `LocalLocker` is decided under its shards' locks without
/// waiting, so the coordinator may make it as a plain function call.
impl ImmediateLocker for LocalLocker {
    fn lock_now(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        self.grant(args, mode)
    }

    fn unlock_now(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        self.release(args, Some(mode))
    }

    fn refresh_now(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        self.refresh_entries(args, Some(mode))
    }

    fn lock_wait_now(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error> {
        self.grant_or_queue(args, mode, wait)
    }
}
