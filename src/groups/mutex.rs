//! A read/write mutex over names that may live in several groups: one
//! [`DRWMutex`] per group, taken in the groups' order.
//!
//! Invariants: the parts are sorted by group id, and every acquisition
//! takes them in that order, so two locks that share groups never wait
//! for each other in a circle; an acquisition that fails or is dropped
//! part-way drops the parts it holds, which releases them (a guard's drop
//! releases, as for any lock).

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{join_all, select_all, FutureExt};
use tokio::time::Instant;

use crate::{DRWMutex, Error, ReadGuard, WriteGuard};

/// A read/write mutex over names spread over several groups of lockers:
/// one part per group, each a [`DRWMutex`] of that group's names, taken
/// in one fixed order (by group id) and released together. Made by
/// [`Groups::rw_mutex`](crate::Groups::rw_mutex).
///
/// All the names are locked, or none: an acquisition that cannot take a
/// part gives back those it took. Two such locks never wait for each
/// other in a circle, since every process takes the groups in the same
/// order.
pub struct GroupedMutex {
    pub(super) resources: Vec<String>,
    /// One part per group the names live in, sorted by group id.
    pub(super) parts: Vec<(Arc<str>, DRWMutex)>,
}

/// How an acquisition waits for each part.
#[derive(Clone, Copy)]
enum Take {
    Wait,
    Try,
    Until(Instant),
}

/// Waiting `timeout` from now: a deadline, or no deadline at all for one
/// past what the clock can count (`Duration::MAX`, say), as a part's own
/// timeout takes it.
fn until(timeout: Duration) -> Take {
    Instant::now()
        .checked_add(timeout)
        .map_or(Take::Wait, Take::Until)
}

/// A guard of one part: what a grouped guard needs of it.
trait Part: Sized + Send + 'static {
    fn take(mutex: &DRWMutex, how: Take) -> impl Future<Output = Result<Self, Error>> + Send + '_;
    fn is_lost(&self) -> bool;
    fn lost(&self) -> impl Future<Output = ()> + Send + 'static;
    fn unlock(self) -> impl Future<Output = Result<(), Error>> + Send;
}

macro_rules! part {
    ($guard:ty, $wait:ident, $try:ident, $timeout:ident) => {
        impl Part for $guard {
            fn take(
                mutex: &DRWMutex,
                how: Take,
            ) -> impl Future<Output = Result<Self, Error>> + Send + '_ {
                async move {
                    match how {
                        Take::Wait => mutex.$wait().await,
                        Take::Try => mutex.$try().await,
                        Take::Until(deadline) => {
                            let left = deadline.saturating_duration_since(Instant::now());
                            mutex.$timeout(left).await
                        }
                    }
                }
            }
            fn is_lost(&self) -> bool {
                <$guard>::is_lost(self)
            }
            fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
                <$guard>::lost(self)
            }
            fn unlock(self) -> impl Future<Output = Result<(), Error>> + Send {
                <$guard>::unlock(self)
            }
        }
    };
}

part!(WriteGuard, lock, try_lock, lock_timeout);
part!(ReadGuard, read, try_read, read_timeout);

impl GroupedMutex {
    /// The names, sorted and each once.
    pub fn resources(&self) -> &[String] {
        &self.resources
    }

    /// The ids of the groups the names live in, in the order they are
    /// taken, each with its part's names.
    pub fn groups(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.parts.iter().map(|(id, m)| (&**id, m.resources()))
    }

    /// Takes every part for writing, in order, waiting as long as it takes.
    ///
    /// A part lost while a later one was waited for leaves the guard lost
    /// from the start ([`GroupedWriteGuard::is_lost`]), as a lock lost at
    /// once would be.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future releases the parts it took, and
    /// a part's acquisition dropped midway leaves nothing behind, as for
    /// [`DRWMutex::lock`].
    pub async fn lock(&self) -> Result<GroupedWriteGuard, Error> {
        self.take(Take::Wait).await.map(|parts| GroupedWriteGuard {
            resources: self.resources.clone(),
            parts,
        })
    }

    /// [`lock`](Self::lock) for reading.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn read(&self) -> Result<GroupedReadGuard, Error> {
        self.take(Take::Wait).await.map(|parts| GroupedReadGuard {
            resources: self.resources.clone(),
            parts,
        })
    }

    /// Takes every part for writing if each is free now; fails with
    /// [`Error::WouldBlock`] as soon as one is not, once it has released
    /// the parts it took.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_lock(&self) -> Result<GroupedWriteGuard, Error> {
        self.take(Take::Try).await.map(|parts| GroupedWriteGuard {
            resources: self.resources.clone(),
            parts,
        })
    }

    /// [`try_lock`](Self::try_lock) for reading.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_read(&self) -> Result<GroupedReadGuard, Error> {
        self.take(Take::Try).await.map(|parts| GroupedReadGuard {
            resources: self.resources.clone(),
            parts,
        })
    }

    /// [`lock`](Self::lock) within `timeout` for all the parts together;
    /// fails with [`Error::Timeout`] after it, having given back the parts
    /// it took.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn lock_timeout(&self, timeout: Duration) -> Result<GroupedWriteGuard, Error> {
        self.take(until(timeout))
            .await
            .map(|parts| GroupedWriteGuard {
                resources: self.resources.clone(),
                parts,
            })
    }

    /// [`lock_timeout`](Self::lock_timeout) for reading.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn read_timeout(&self, timeout: Duration) -> Result<GroupedReadGuard, Error> {
        self.take(until(timeout))
            .await
            .map(|parts| GroupedReadGuard {
                resources: self.resources.clone(),
                parts,
            })
    }

    /// Takes the parts in order; on an error releases those taken (and
    /// waits for their release, so that the names are free again when it
    /// returns) and returns it. Dropped midway, it drops the parts taken,
    /// which releases them in the background.
    async fn take<G: Part>(&self, how: Take) -> Result<Vec<(Arc<str>, G)>, Error> {
        let mut taken = Vec::with_capacity(self.parts.len());
        for (id, mutex) in &self.parts {
            match G::take(mutex, how).await {
                Ok(guard) => taken.push((id.clone(), guard)),
                Err(err) => {
                    // The acquisition's own error is what the caller must
                    // hear; a release that could not be confirmed goes on
                    // in the background, as any unlock's does.
                    let _ = unlock_all(taken).await;
                    return Err(err);
                }
            }
        }
        Ok(taken)
    }
}

impl fmt::Debug for GroupedMutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupedMutex")
            .field("groups", &self.groups().collect::<Vec<(&str, &[String])>>())
            .finish()
    }
}

/// Whether any part is lost.
fn any_lost<G: Part>(parts: &[(Arc<str>, G)]) -> bool {
    parts.iter().any(|(_, g)| g.is_lost())
}

/// Resolves when the first part is lost.
fn first_lost<G: Part>(
    parts: &[(Arc<str>, G)],
) -> impl Future<Output = ()> + Send + 'static + use<G> {
    let each: Vec<_> = parts.iter().map(|(_, g)| g.lost().boxed()).collect();
    async move {
        if !each.is_empty() {
            select_all(each).await;
        }
    }
}

/// Releases every part at once; the first error, in group order.
async fn unlock_all<G: Part>(parts: Vec<(Arc<str>, G)>) -> Result<(), Error> {
    let results = join_all(parts.into_iter().map(|(_, g)| g.unlock())).await;
    results.into_iter().collect()
}

macro_rules! grouped_guard {
    ($(#[$doc:meta])* $name:ident, $guard:ty) => {
        $(#[$doc])*
        pub struct $name {
            resources: Vec<String>,
            parts: Vec<(Arc<str>, $guard)>,
        }

        impl $name {
            /// The names held, sorted and each once.
            pub fn resources(&self) -> &[String] {
                &self.resources
            }

            /// Each group's id and its part: a guard of its own, with its
            /// uid and its fencing token (tokens of two groups are not
            /// comparable: fence with the part of the name you write).
            pub fn parts(&self) -> impl Iterator<Item = (&str, &$guard)> {
                self.parts.iter().map(|(id, g)| (&**id, g))
            }

            /// Whether any part is lost: from then on others may be
            /// granted some of the names. See
            #[doc = concat!("[`", stringify!($guard), "::is_lost`](crate::", stringify!($guard), "::is_lost).")]
            pub fn is_lost(&self) -> bool {
                any_lost(&self.parts)
            }

            /// Resolves when the first part is lost, before any locker of
            /// its group can free it (see
            #[doc = concat!("[`", stringify!($guard), "::lost`](crate::", stringify!($guard), "::lost)).")]
            pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static + use<> {
                first_lost(&self.parts)
            }

            /// Releases every part at once and waits until each group's
            /// quorum confirms; the first error, in group order
            /// ([`Error::LockLost`] when a part had been lost).
            ///
            /// # Cancel safety
            ///
            /// Cancel safe: once this future is created every part is
            /// being released, as each part's own `unlock` is.
            pub async fn unlock(self) -> Result<(), Error> {
                unlock_all(self.parts).await
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("resources", &self.resources)
                    .field("parts", &self.parts)
                    .finish()
            }
        }
    };
}

grouped_guard!(
    /// A write lock on names in several groups, from
    /// [`GroupedMutex::lock`]; dropping it releases every part, as
    /// dropping a [`WriteGuard`] does.
    GroupedWriteGuard,
    WriteGuard
);
grouped_guard!(
    /// A read lock on names in several groups, from
    /// [`GroupedMutex::read`]; dropping it releases every part.
    GroupedReadGuard,
    ReadGuard
);
