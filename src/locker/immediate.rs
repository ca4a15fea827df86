//! `ImmediateLocker`: the calls of a locker that never waits, made as plain
//! function calls instead of futures.
//!
//! A [`NetLocker`](crate::NetLocker) call returns a boxed future, and the
//! coordinator wraps each call in a second one so that it can finish in the
//! background when its caller stops waiting. For a locker across a network
//! that costs little beside the round trip. For a locker in the caller's own
//! process, which decides every call under a short lock and answers on the
//! first poll, the two allocations and the dynamic polls were most of the
//! cost of a lock. A locker that never waits can therefore offer its calls
//! through [`NetLocker::immediate`](crate::NetLocker::immediate); the
//! coordinator then calls it directly and allocates nothing per call.

use crate::locker::wait::{WaitArgs, WaitReply};
use crate::{Error, LockArgs, LockMode};

/// The calls of a [`NetLocker`](crate::NetLocker) that answers without
/// waiting, as plain functions.
///
/// Each method must have exactly the effect and the answer of the
/// `NetLocker` method it names, for the same arguments: the coordinator
/// uses whichever of the two it likes, and a locker must not be able to
/// tell them apart. Every method is applied entirely or not at all before it
/// returns, so there is nothing to cancel.
///
/// Implement it only for a locker that answers at once, and return it from
/// [`NetLocker::immediate`](crate::NetLocker::immediate). A locker that
/// waits for anything (a network, a disk, another task) must not implement
/// it: it would block the caller's worker thread, and no timeout applies to
/// these calls (the coordinator's acquire and unlock deadlines only cut
/// futures off), so a call that blocks holds up its caller for as long as
/// it blocks. A wrapper around another
/// locker (a fault injector, a call counter) may forward the inner locker's
/// `immediate()`, wrapping it, or return `None` so that every call goes
/// through its own async methods.
///
/// ```
/// use std::sync::Arc;
/// use quorum_lock::{LocalLocker, LockArgs, LockMode, NetLocker};
///
/// let locker = LocalLocker::new();
/// let args = LockArgs {
///     uid: "uid-1".into(),
///     resources: Arc::from(vec!["reports".to_string()]),
///     owner: "node-a".into(),
///     source: "example".into(),
///     quorum: 1,
/// };
/// let now = locker.immediate().expect("an in-process locker answers at once");
/// assert!(now.lock_now(&args, LockMode::Write)?);
/// assert!(now.unlock_now(&args, LockMode::Write)?);
/// # Ok::<(), quorum_lock::Error>(())
/// ```
pub trait ImmediateLocker: Send + Sync {
    /// [`NetLocker::lock`](crate::NetLocker::lock) for `LockMode::Write`,
    /// [`NetLocker::rlock`](crate::NetLocker::rlock) for `LockMode::Read`.
    fn lock_now(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error>;

    /// [`NetLocker::unlock`](crate::NetLocker::unlock) for `LockMode::Write`,
    /// [`NetLocker::runlock`](crate::NetLocker::runlock) for `LockMode::Read`.
    fn unlock_now(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error>;

    /// [`NetLocker::refresh_mode`](crate::NetLocker::refresh_mode).
    fn refresh_now(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error>;

    /// [`NetLocker::lock_wait`](crate::NetLocker::lock_wait).
    fn lock_wait_now(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error>;
}
