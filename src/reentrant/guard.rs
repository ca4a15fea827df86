//! `ReentrantGuard`: one of the counted holds a `Holder` has on a lock, and
//! the hold they share.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use futures::future::Either;
use tokio_util::sync::CancellationToken;

use super::Shared;
use crate::{Error, LockMode, ReadGuard, WriteGuard};

/// The lock the lockers granted, held as long as any guard of it lives.
pub(super) enum Lock {
    Write(WriteGuard),
    Read(ReadGuard),
}

/// What every guard of one hold shares.
pub(super) struct Hold {
    lock: Lock,
    /// Dropped after `lock`, so the holder forgets the hold once its
    /// release has begun.
    filed: Filed,
}

/// Where a hold is filed; forgets the entry when the hold is gone.
struct Filed {
    shared: Arc<Shared>,
    key: Arc<[String]>,
}

impl Drop for Filed {
    fn drop(&mut self) {
        self.shared.prune(&self.key, None);
    }
}

impl Hold {
    pub(super) fn new(lock: Lock, shared: Arc<Shared>, key: Arc<[String]>) -> Self {
        Hold {
            lock,
            filed: Filed { shared, key },
        }
    }

    pub(super) fn mode(&self) -> LockMode {
        match &self.lock {
            Lock::Write(_) => LockMode::Write,
            Lock::Read(_) => LockMode::Read,
        }
    }

    pub(super) fn resources(&self) -> &[String] {
        match &self.lock {
            Lock::Write(g) => g.resources(),
            Lock::Read(g) => g.resources(),
        }
    }

    pub(super) fn is_lost(&self) -> bool {
        match &self.lock {
            Lock::Write(g) => g.is_lost(),
            Lock::Read(g) => g.is_lost(),
        }
    }
}

/// One hold of a lock taken through a [`Holder`](crate::Holder), by its
/// first acquisition or a nested one.
///
/// Every guard of the same hold is the same lock on the lockers: the same
/// [`uid`](Self::uid), the same [`fencing_token`](Self::fencing_token), and
/// the same loss, which [`is_lost`](Self::is_lost), [`lost`](Self::lost)
/// and [`loss_token`](Self::loss_token) report to each of them. The lock is
/// released on the lockers when the last guard is released, by
/// [`unlock`](Self::unlock) or by drop, in whatever order the guards go.
/// Each guard is owned and `'static`, like a
/// [`WriteGuard`]: move it into a task or keep it across `.await`.
///
/// ```
/// # use std::sync::Arc;
/// # use quorum_lock::{Dsync, LocalLocker, LockMode, NetLocker};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), quorum_lock::Error> {
/// # let ds = Dsync::new((0..3).map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>).collect())?;
/// let accounts = ds.rw_mutex(["accounts/42"])?;
/// let holder = ds.holder();
/// let outer = holder.lock(&accounts).await?;
/// let inner = holder.read(&accounts).await?; // served by the write hold
/// assert_eq!((inner.uid(), inner.mode(), inner.holds()), (outer.uid(), LockMode::Write, 2));
/// assert_eq!(inner.fencing_token().await?, outer.fencing_token().await?);
///
/// outer.unlock().await?; // not the last: the write lock stays on the lockers
/// assert!(ds.rw_mutex(["accounts/42"])?.try_read().await.is_err());
/// inner.unlock().await?; // the last: released, and confirmed
/// assert!(ds.rw_mutex(["accounts/42"])?.try_lock().await.is_ok());
/// # Ok(())
/// # }
/// ```
#[must_use = "the hold is given up as soon as the guard is dropped"]
pub struct ReentrantGuard {
    hold: Arc<Hold>,
}

impl ReentrantGuard {
    pub(super) fn new(hold: Arc<Hold>) -> Self {
        ReentrantGuard { hold }
    }

    /// The locked resource names, sorted.
    pub fn resources(&self) -> &[String] {
        self.hold.resources()
    }

    /// The uid of the acquisition the hold came from, as the lockers know
    /// it; the same for every guard of the hold.
    pub fn uid(&self) -> &str {
        match &self.hold.lock {
            Lock::Write(g) => g.uid(),
            Lock::Read(g) => g.uid(),
        }
    }

    /// The mode the lockers hold the lock in. A read asked for while the
    /// holder held the write lock says [`LockMode::Write`]: it is served by
    /// the write hold.
    pub fn mode(&self) -> LockMode {
        self.hold.mode()
    }

    /// How many guards share this hold right now, this one included. The
    /// lock is released on the lockers when it would drop to zero.
    pub fn holds(&self) -> usize {
        Arc::strong_count(&self.hold)
    }

    /// How many lockers are known to hold the lock right now.
    pub fn granted_by(&self) -> usize {
        match &self.hold.lock {
            Lock::Write(g) => g.granted_by(),
            Lock::Read(g) => g.granted_by(),
        }
    }

    /// The fencing token of the lock, as [`WriteGuard::fencing_token`]:
    /// drawn once, by whichever guard of the hold asks first, and the same
    /// for every guard of the hold after that.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`WriteGuard::fencing_token`].
    pub async fn fencing_token(&self) -> Result<u64, Error> {
        match &self.hold.lock {
            Lock::Write(g) => g.fencing_token().await,
            Lock::Read(g) => g.fencing_token().await,
        }
    }

    /// Whether the lock is lost, as [`WriteGuard::is_lost`]. Every guard of
    /// the hold answers the same.
    pub fn is_lost(&self) -> bool {
        self.hold.is_lost()
    }

    /// Resolves when the lock is lost, as [`WriteGuard::lost`]; it fires
    /// for every guard of the hold.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static + use<> {
        match &self.hold.lock {
            Lock::Write(g) => Either::Left(g.lost()),
            Lock::Read(g) => Either::Right(g.lost()),
        }
    }

    /// A token cancelled when the lock is lost, as
    /// [`WriteGuard::loss_token`].
    pub fn loss_token(&self) -> CancellationToken {
        match &self.hold.lock {
            Lock::Write(g) => g.loss_token(),
            Lock::Read(g) => g.loss_token(),
        }
    }

    /// Gives up this hold. When it is the last one, releases the lock and
    /// waits until a quorum of lockers confirms, as [`WriteGuard::unlock`]
    /// does, with the same errors. Otherwise it sends nothing: the lock
    /// stays held for the other guards.
    ///
    /// Either way it returns [`Error::LockLost`] when the lock had already
    /// been lost, so that every nested section learns that its work was not
    /// protected to the end.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe. Dropping the future gives up the hold as dropping the
    /// guard would: when it was the last one, the lock is released in the
    /// background, as for [`WriteGuard::unlock`].
    pub async fn unlock(self) -> Result<(), Error> {
        let lost = self.hold.is_lost();
        // Exactly one of several guards unlocked at once gets the hold.
        let Some(hold) = Arc::into_inner(self.hold) else {
            return if lost { Err(Error::LockLost) } else { Ok(()) };
        };
        let Hold { lock, filed } = hold;
        drop(filed);
        match lock {
            Lock::Write(g) => g.unlock().await,
            Lock::Read(g) => g.unlock().await,
        }
    }
}

impl fmt::Debug for ReentrantGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReentrantGuard")
            .field("resources", &self.resources())
            .field("uid", &self.uid())
            .field("mode", &self.mode())
            .field("holds", &self.holds())
            .field("lost", &self.is_lost())
            .finish()
    }
}
