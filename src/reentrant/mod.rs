//! Reentrant locks: the `Holder` handle that says who holds a lock, and the
//! bookkeeping that lets it take a lock it already holds again.
//!
//! A holder files each lock it holds under the mutex's sorted resource set.
//! The file keeps only a weak reference to the hold (the `WriteGuard` or
//! `ReadGuard` the lockers granted); every [`ReentrantGuard`] is a strong
//! one, so the hold, and with it the lock on the lockers, goes away with the
//! last guard. A nested acquire upgrades the weak reference and calls no
//! locker. First acquisitions of one resource set within a holder take
//! turns through a per-set gate, so that two tasks of the same holder never
//! both go to the lockers for it: the second finds the first one's hold.

mod guard;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::time::Instant;

pub use guard::ReentrantGuard;

use crate::lock::coordinator::Coordinator;
use crate::quorum::clock::after;
use crate::{DRWMutex, Error, LockMode, WaitStatus};
use guard::{Hold, Lock};

/// Who holds a lock, for locks that the same holder may take again.
/// Made by [`Dsync::holder`](crate::Dsync::holder).
///
/// [`lock`](Self::lock), [`read`](Self::read) and their `try_` and
/// `_timeout` forms take a [`DRWMutex`] of the same `Dsync` and return a
/// [`ReentrantGuard`]. The first of them acquires the lock from the lockers
/// like the mutex's own methods. While any guard of that hold is alive,
/// asking again through this holder is granted at once, without calling any
/// locker: the hold is counted, and every nested guard is the same lock,
/// with the same uid, fencing token and loss. The lock is released on the
/// lockers when the last guard is released, whatever the order.
///
/// # Who is "the same holder"
///
/// The handle and its clones, and nothing else. Identity is passed on
/// explicitly, because async code gives no implicit identity that is right:
///
/// * **A nested call** that takes the lock again gets the holder as an
///   argument (`&Holder`) and is granted at once.
/// * **A spawned task working for the same holder** gets a clone moved into
///   it, and is granted at once too, on whichever thread it runs.
/// * **Two unrelated tasks** each use their own `dsync.holder()` and
///   exclude each other like two clients on different machines, even in the
///   same process, on the same thread.
///
/// A thread identity would be wrong: a task moves between the worker
/// threads of a runtime at every `.await`, so the same task would look like
/// two holders, and unrelated tasks that share a thread would look like
/// one, which breaks exclusion. A task-local identity fails the second case:
/// task-locals do not follow `tokio::spawn`, so a task spawned to do part of
/// the work would deadlock against its own parent, and code that wants the
/// opposite has no way to say so.
///
/// # Modes
///
/// | held by this holder | asked for | result |
/// |---|---|---|
/// | write | write or read | granted at once, the same hold |
/// | read | read | granted at once, the same hold |
/// | read | write | [`Error::UpgradeNotSupported`] at once |
/// | nothing | either | acquired from the lockers |
///
/// A read asked for while holding the write lock is served by the write
/// hold: the lockers keep the *write* lock until the last guard of either
/// kind is released. This is the only form of downgrade offered. A true
/// downgrade in place would release the write lock and then acquire the
/// read lock, and in that gap another writer could be granted it. An
/// upgrade from read to write is refused: waiting for the write lock while
/// holding a read lock of it would wait for oneself forever.
///
/// # Limits
///
/// * A hold is filed under the mutex's resource set, sorted and
///   de-duplicated: `rw_mutex(["b", "a"])` and `rw_mutex(["a", "b", "a"])`
///   are the same lock, but `["a"]` and `["a", "b"]` are two locks that
///   conflict on the lockers like any others. A holder that holds one and
///   waits for the other waits for itself; use the same set.
/// * A nested acquire while the hold is already lost fails with
///   [`Error::LockLost`]: it never hands out a guard that is lost from the
///   start. Release every guard of the lost hold; the next acquire then
///   goes to the lockers again.
/// * The plain [`DRWMutex::lock`] and [`DRWMutex::read`] know nothing of
///   holders: they stay non-reentrant, and wait for a holder's lock like
///   for anyone else's.
/// * The handle holds nothing itself, and dropping it releases nothing:
///   the guards do.
///
/// ```
/// use std::sync::Arc;
/// use quorum_lock::{DRWMutex, Dsync, Error, Holder, LocalLocker, NetLocker};
///
/// async fn post_entry(holder: &Holder, ledger: &DRWMutex) -> Result<(), Error> {
///     let guard = holder.lock(ledger).await?; // already held: granted at once
///     // ... append to the ledger ...
///     guard.unlock().await // not the last hold: nothing is sent
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Error> {
/// let ds = Dsync::new((0..3).map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>).collect())?;
/// let ledger = ds.rw_mutex(["ledger"])?;
/// let holder = ds.holder();
///
/// let outer = holder.lock(&ledger).await?;
/// post_entry(&holder, &ledger).await?; // a nested call
///
/// let (worker, mutex) = (holder.clone(), ledger.clone()); // a task for the same holder
/// tokio::spawn(async move { post_entry(&worker, &mutex).await })
///     .await
///     .expect("the task panicked")?;
///
/// // Another holder is another client.
/// assert!(matches!(ds.holder().try_lock(&ledger).await, Err(Error::WouldBlock)));
/// outer.unlock().await?; // the last hold: released on the lockers
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Holder {
    shared: Arc<Shared>,
}

/// What the clones of one holder share.
pub(crate) struct Shared {
    /// The coordinator of the `Dsync` that made the holder; only its
    /// mutexes are served, since resource names mean nothing across
    /// clusters.
    coord: Arc<Coordinator>,
    /// One slot per resource set that is held or being acquired.
    slots: Mutex<HashMap<Arc<[String]>, Slot>>,
}

/// Serializes the first acquisitions of one resource set.
type Gate = tokio::sync::Mutex<()>;

struct Slot {
    /// The hold, while any guard of it lives.
    hold: Weak<Hold>,
    /// Taken by the task that acquires the set from the lockers. Cloned only
    /// under the `slots` mutex, so its count, read under that mutex, says
    /// how many tasks are acquiring or waiting to.
    gate: Arc<Gate>,
}

/// What a look at a slot found.
enum Found {
    /// A live hold.
    Held(Arc<Hold>),
    /// No hold: the gate to take before acquiring.
    Free(Arc<Gate>),
}

/// How long an acquire from the lockers keeps trying.
#[derive(Clone, Copy)]
enum Patience {
    Once,
    Forever,
    Within(Duration),
}

impl Holder {
    pub(crate) fn new(coord: Arc<Coordinator>) -> Self {
        Holder {
            shared: Arc::new(Shared {
                coord,
                slots: Mutex::default(),
            }),
        }
    }

    /// Waits until this holder holds the exclusive lock of `mutex`.
    ///
    /// Granted at once, with no locker call, when this holder already holds
    /// it; fails at once with [`Error::UpgradeNotSupported`] when it holds
    /// only the read lock, and with [`Error::LockLost`] when its hold is
    /// lost. Otherwise it acquires as [`DRWMutex::lock`] does. When another
    /// clone of this holder is acquiring the same lock, it waits for that
    /// acquisition and then shares its hold. Fails with
    /// [`Error::InvalidArgument`] for a mutex of another `Dsync`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`DRWMutex::lock`]: dropping the future leaves no
    /// grant and no place in line behind, and takes no hold.
    pub async fn lock(&self, mutex: &DRWMutex) -> Result<ReentrantGuard, Error> {
        self.acquire(mutex, LockMode::Write, Patience::Forever)
            .await
    }

    /// Waits until this holder holds a shared lock of `mutex`; served at
    /// once by a read or write lock this holder already holds. Fails as
    /// [`lock`](Self::lock) does, except that it is never an upgrade.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn read(&self, mutex: &DRWMutex) -> Result<ReentrantGuard, Error> {
        self.acquire(mutex, LockMode::Read, Patience::Forever).await
    }

    /// Like [`lock`](Self::lock), but a first acquisition makes one round,
    /// as [`DRWMutex::try_lock`], and fails with [`Error::WouldBlock`] when
    /// the lock is held elsewhere. It also fails with `WouldBlock`, without
    /// waiting, while another clone of this holder is acquiring the same
    /// lock.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_lock(&self, mutex: &DRWMutex) -> Result<ReentrantGuard, Error> {
        self.acquire(mutex, LockMode::Write, Patience::Once).await
    }

    /// Like [`read`](Self::read), but fails as [`try_lock`](Self::try_lock)
    /// does instead of waiting.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_read(&self, mutex: &DRWMutex) -> Result<ReentrantGuard, Error> {
        self.acquire(mutex, LockMode::Read, Patience::Once).await
    }

    /// Like [`lock`](Self::lock), but gives up after `timeout`, counting
    /// the wait for another clone's acquisition, with the errors of
    /// [`DRWMutex::lock_timeout`]. (Behind a clone that waits through
    /// another handle of the same names, it can only say
    /// [`Error::Timeout`].)
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn lock_timeout(
        &self,
        mutex: &DRWMutex,
        timeout: Duration,
    ) -> Result<ReentrantGuard, Error> {
        self.acquire(mutex, LockMode::Write, Patience::Within(timeout))
            .await
    }

    /// Like [`read`](Self::read), but gives up with [`Error::Timeout`] after
    /// `timeout`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn read_timeout(
        &self,
        mutex: &DRWMutex,
        timeout: Duration,
    ) -> Result<ReentrantGuard, Error> {
        self.acquire(mutex, LockMode::Read, Patience::Within(timeout))
            .await
    }

    /// Whether `other` is this holder: a clone of the same handle.
    pub fn same_as(&self, other: &Holder) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    async fn acquire(
        &self,
        mutex: &DRWMutex,
        mode: LockMode,
        mut patience: Patience,
    ) -> Result<ReentrantGuard, Error> {
        if !Arc::ptr_eq(mutex.coordinator(), &self.shared.coord) {
            return Err(Error::invalid(
                "this holder belongs to another Dsync; take the holder from the Dsync \
                 that made the mutex",
            ));
        }
        let key = mutex.resource_set();
        let gate = match self.shared.enter(key) {
            Found::Held(hold) => return nested(hold, mode),
            Found::Free(gate) => gate,
        };
        let claim = Claim {
            shared: &self.shared,
            key,
            gate,
        };
        let _turn = match patience {
            Patience::Once => claim.gate.try_lock().map_err(|_| Error::WouldBlock)?,
            Patience::Forever => claim.gate.lock().await,
            Patience::Within(timeout) => {
                let deadline = deadline(timeout)?;
                // Behind a clone's acquisition: why that one waits (on this
                // handle, when the clone shares it) is why this one gave up.
                let turn = tokio::time::timeout_at(deadline, claim.gate.lock())
                    .await
                    .map_err(|_| {
                        mutex
                            .waiting()
                            .map_or(Error::Timeout, WaitStatus::into_error)
                    })?;
                patience = Patience::Within(left(deadline));
                turn
            }
        };
        // Another clone may have acquired it while this one waited its turn.
        if let Some(hold) = self.shared.held(key) {
            return nested(hold, mode);
        }
        let lock = match (mode, patience) {
            (LockMode::Write, Patience::Forever) => Lock::Write(mutex.lock().await?),
            (LockMode::Write, Patience::Once) => Lock::Write(mutex.try_lock().await?),
            (LockMode::Write, Patience::Within(timeout)) => {
                Lock::Write(mutex.lock_timeout(timeout).await?)
            }
            (LockMode::Read, Patience::Forever) => Lock::Read(mutex.read().await?),
            (LockMode::Read, Patience::Once) => Lock::Read(mutex.try_read().await?),
            (LockMode::Read, Patience::Within(timeout)) => {
                Lock::Read(mutex.read_timeout(timeout).await?)
            }
        };
        let hold = Arc::new(Hold::new(lock, self.shared.clone(), key.clone()));
        claim.file(&hold);
        Ok(ReentrantGuard::new(hold))
    }
}

/// The deadline `timeout` from now. Checks for a runtime first, as the
/// mutex's own timeout forms do: the timer needs one.
fn deadline(timeout: Duration) -> Result<Instant, Error> {
    Handle::try_current().map_err(|_| Error::NoRuntime)?;
    Ok(after(Instant::now(), timeout))
}

/// What is left until `deadline`.
fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

/// A nested guard on `hold` for `mode`, unless that is an upgrade or the
/// hold is lost. Called outside the `slots` mutex: dropping `hold` may drop
/// the last reference, whose cleanup takes that mutex.
fn nested(hold: Arc<Hold>, mode: LockMode) -> Result<ReentrantGuard, Error> {
    if mode == LockMode::Write && hold.mode() == LockMode::Read {
        return Err(Error::UpgradeNotSupported {
            resources: hold.resources().to_vec(),
        });
    }
    if hold.is_lost() {
        return Err(Error::LockLost);
    }
    Ok(ReentrantGuard::new(hold))
}

impl Shared {
    fn slots(&self) -> MutexGuard<'_, HashMap<Arc<[String]>, Slot>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The live hold filed under `key`, or else the gate to acquire it
    /// through, in a slot made for it when there was none.
    fn enter(&self, key: &Arc<[String]>) -> Found {
        let mut slots = self.slots();
        let slot = slots.entry(key.clone()).or_insert_with(|| Slot {
            hold: Weak::new(),
            gate: Arc::new(Gate::new(())),
        });
        match slot.hold.upgrade() {
            Some(hold) => Found::Held(hold),
            None => Found::Free(slot.gate.clone()),
        }
    }

    /// The live hold filed under `key`, if any.
    fn held(&self, key: &[String]) -> Option<Arc<Hold>> {
        self.slots().get(key).and_then(|slot| slot.hold.upgrade())
    }

    /// Forgets the slot of `key` when nothing holds it and no task is
    /// acquiring it or waiting to: the gate's only references are the
    /// slot's and, when a claim asks, the claim's own.
    fn prune(&self, key: &[String], claim: Option<&Arc<Gate>>) {
        let mut slots = self.slots();
        let Some(slot) = slots.get(key) else {
            return;
        };
        let unused = match claim {
            Some(gate) => Arc::ptr_eq(gate, &slot.gate) && Arc::strong_count(&slot.gate) == 2,
            None => Arc::strong_count(&slot.gate) == 1,
        };
        if unused && slot.hold.strong_count() == 0 {
            slots.remove(key);
        }
    }

    /// How many resource sets have a slot: held, or being acquired.
    #[cfg(test)]
    fn slot_count(&self) -> usize {
        self.slots().len()
    }
}

/// One task's claim on a slot's gate; forgets the slot when it ends and
/// nothing else needs it, so the table never grows past the locks held and
/// being acquired.
struct Claim<'a> {
    shared: &'a Arc<Shared>,
    key: &'a Arc<[String]>,
    gate: Arc<Gate>,
}

impl Claim<'_> {
    /// Files `hold` in the slot, for nested acquires to find.
    fn file(&self, hold: &Arc<Hold>) {
        let mut slots = self.shared.slots();
        let slot = slots.entry(self.key.clone()).or_insert_with(|| Slot {
            hold: Weak::new(),
            gate: self.gate.clone(),
        });
        slot.hold = Arc::downgrade(hold);
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.shared.prune(self.key, Some(&self.gate));
    }
}

impl fmt::Debug for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let held: Vec<Arc<[String]>> = self
            .shared
            .slots()
            .iter()
            .filter(|(_, slot)| slot.hold.strong_count() > 0)
            .map(|(key, _)| key.clone())
            .collect();
        f.debug_struct("Holder").field("held", &held).finish()
    }
}
