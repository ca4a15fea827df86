//! Counting semaphores on the quorum lock: `Semaphore` (at most `k` holders
//! of a name at once, served in line) and the `SemaphorePermit` a holder
//! keeps.
//!
//! A semaphore named `N` with `k` permits is made of ordinary locks, so it
//! inherits their guarantees instead of needing new ones:
//!
//! * **one write lock per permit**, on `semaphore/N/permit/0` …
//!   `semaphore/N/permit/k-1`. A holder holds one of them, so at most `k`
//!   can hold at once by the write lock's own exclusion. A counter of
//!   holders kept on each locker would not do: with three lockers and
//!   `k = 2`, holders granted by lockers {1, 2}, {2, 3} and {1, 3} each have
//!   a majority while no locker granted more than two (docs/semaphore.md);
//! * **a line**, the write lock on `semaphore/N/queue`. Every acquirer waits
//!   for it in turn (first come, first served, pushed grants) and only its
//!   holder takes a permit, waiting on all `k` slots at once, so a later
//!   acquirer never takes a permit that an earlier one is waiting for;
//! * **the count**: every holder keeps the read lock on names that spell
//!   `k` in binary, one `count-bit` name per digit, and checks once, with
//!   the write lock on the flipped digits, that no holder spells another
//!   count. Two processes that open `N` with different `k` cannot both
//!   hold: the second gets [`Error::PermitsMismatch`];
//! * **the count, per slot**: a slot's write lock also covers `held/I/D/V`,
//!   the holder's count spelled for slot `I` (two digits in base 32). When
//!   a check is refused, the acquirer reads those of the other values (read
//!   locks): only a process of another count write-locks them, so what a
//!   read-out finds is never a check, a read-out, or anything else left
//!   behind by a process of the same count.

mod acquire;
mod names;
mod permit;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use names::{MAX_PERMITS, SEMAPHORE_PREFIX};
pub use permit::SemaphorePermit;

use crate::lock::coordinator::Coordinator;
use crate::lock::wait_watch::WaitBoard;
use crate::{DRWMutex, Error, ReadGuard, WaitStatus, WriteGuard};
use names::Names;

/// How many refused checks `try_acquire` makes before it answers
/// `WouldBlock`: a check is also refused by an earlier acquirer's check on
/// a locker that has not processed its release yet, which the first
/// retries outlast.
const COUNT_CHECKS: u32 = 3;

/// How often an acquirer whose check keeps being refused reads the counts
/// in use out again, after the first refusal: the refusals come from a
/// check left behind (it expires within the lockers' validity) until a
/// read-out says otherwise, and a read-out costs about sixty read locks of
/// up to [`MAX_PERMITS`] names each.
const READ_OUT_EVERY: Duration = Duration::from_secs(5);

/// A counting semaphore: at most `k` holders of a name at a time among
/// every process that shares a [`Dsync`](crate::Dsync)'s lockers. Made by
/// [`Dsync::semaphore`](crate::Dsync::semaphore); the handle holds nothing
/// and is cheap to clone.
///
/// Acquirers wait in one line, first come first served, with grants pushed
/// by the lockers; a [`SemaphorePermit`] is refreshed in the background,
/// tells its holder when it is lost before anyone else can take its place,
/// carries a fencing token, and is released when dropped.
///
/// ```
/// # use std::sync::Arc;
/// # use quorum_lock::{Dsync, Error, LocalLocker, NetLocker};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Error> {
/// # let ds = Dsync::new((0..3).map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>).collect())?;
/// // At most two rebuilds at once in the whole fleet.
/// let rebuilds = ds.semaphore("rebuilds", 2)?;
/// let first = rebuilds.acquire().await?;
/// let second = rebuilds.acquire().await?;
/// assert!(matches!(rebuilds.try_acquire().await, Err(Error::WouldBlock)));
/// drop(first);
/// let third = rebuilds.acquire().await?; // granted once `first` is released
/// assert_ne!(second.slots(), third.slots());
/// # Ok(())
/// # }
/// ```
///
/// Every process must open a name with the same number of permits:
///
/// ```
/// # use std::sync::Arc;
/// # use quorum_lock::{Dsync, Error, LocalLocker, NetLocker};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Error> {
/// # let ds = Dsync::new((0..3).map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>).collect())?;
/// let held = ds.semaphore("rebuilds", 2)?.acquire().await?;
/// let err = ds.semaphore("rebuilds", 3)?.try_acquire().await.unwrap_err();
/// assert!(matches!(err, Error::PermitsMismatch { permits: 3, in_use: Some(2), .. }), "{err:?}");
/// # drop(held);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    name: Arc<str>,
    coord: Arc<Coordinator>,
    queue: DRWMutex,
    slots: Arc<[DRWMutex]>,
    count: DRWMutex,
    other_counts: DRWMutex,
    /// `semaphore/` + the name: the stem of the names a read-out locks.
    base: Arc<str>,
    /// What the handle's clones share.
    shared: Arc<Shared>,
}

/// What a handle and its clones share.
#[derive(Default)]
struct Shared {
    /// The count's read lock, while a permit of this handle holds it: a
    /// later acquire of the handle reuses it instead of taking and checking
    /// its own (docs/semaphore.md, "One count lock per handle").
    count: std::sync::Mutex<std::sync::Weak<ReadGuard>>,
    /// The slot the next acquire tries first.
    next_slot: std::sync::atomic::AtomicUsize,
    /// Where the latest acquire reports why it waits, for `waiting()`.
    board: WaitBoard,
}

/// What an acquire takes: the count's read lock and its slots.
type Taken = (Arc<ReadGuard>, Vec<(usize, WriteGuard)>);

/// How long an acquire keeps trying.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Patience {
    OneRound,
    Forever,
}

impl Semaphore {
    pub(crate) fn new(
        name: &str,
        permits: usize,
        coord: Arc<Coordinator>,
        mutex: &dyn Fn(Vec<String>) -> DRWMutex,
    ) -> Result<Semaphore, Error> {
        let names = Names::new(name, permits)?;
        Ok(Semaphore {
            name: name.into(),
            coord,
            queue: mutex(vec![names.queue]),
            slots: names.permits.into_iter().map(mutex).collect(),
            count: mutex(names.count),
            other_counts: mutex(names.other_counts),
            base: names.base.into(),
            shared: Arc::default(),
        })
    }

    /// The semaphore's name, as given to `Dsync::semaphore`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many permits the semaphore has: `k`.
    pub fn permits(&self) -> usize {
        self.slots.len()
    }

    /// Waits in line for a permit.
    ///
    /// Waits for as long as all permits are held or the quorum is
    /// unreachable; bound it with [`acquire_timeout`](Self::acquire_timeout)
    /// when that is not acceptable. Fails on permanent errors, and with
    /// [`Error::PermitsMismatch`] when the semaphore is held under another
    /// number of permits. That is found at the head of the line, so it is
    /// at once only when nobody is in line ahead: a client with another
    /// count first waits behind those who came before it, and a head that
    /// waits for a slot keeps the line until a permit is released.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe. Dropping the future leaves no permit, no place in line
    /// and no other lock behind: each is released in the background.
    pub async fn acquire(&self) -> Result<SemaphorePermit, Error> {
        self.watched(1, Patience::Forever, None).await
    }

    /// Waits in line for `m` permits, taken together: the permit returned
    /// holds `m` slots, or the call holds nothing.
    ///
    /// While the head of the line waits for its `m` slots it keeps those it
    /// already has, and nobody behind it takes one, so a large request is
    /// not starved by small ones (and small ones wait behind it, as in
    /// `tokio::sync::Semaphore`). Fails with [`Error::InvalidArgument`] when
    /// `m` is 0 or more than the semaphore's permits.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire).
    pub async fn acquire_many(&self, m: usize) -> Result<SemaphorePermit, Error> {
        self.watched(m, Patience::Forever, None).await
    }

    /// Makes one attempt at a permit: fails with [`Error::WouldBlock`] when
    /// all are held or somebody is waiting in line, with
    /// [`Error::PermitsMismatch`] when the semaphore is held under another
    /// number of permits (and nobody is in line), and with
    /// [`Error::QuorumUnavailable`] when too few lockers answered.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire).
    pub async fn try_acquire(&self) -> Result<SemaphorePermit, Error> {
        self.watched(1, Patience::OneRound, None).await
    }

    /// Makes one attempt at `m` permits together; fails as
    /// [`try_acquire`](Self::try_acquire).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire).
    pub async fn try_acquire_many(&self, m: usize) -> Result<SemaphorePermit, Error> {
        self.watched(m, Patience::OneRound, None).await
    }

    /// Like [`acquire`](Self::acquire), but gives up after `timeout`,
    /// releasing whatever it had taken, with an error that says why it
    /// waited, as [`DRWMutex::lock_timeout`] does: [`Error::Timeout`] when
    /// the permits (or the line) were held elsewhere (or the lockers were
    /// still answering), [`Error::Quarantined`]
    /// or [`Error::QuorumUnavailable`] when the lockers could not grant.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire).
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<SemaphorePermit, Error> {
        tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        self.watched(1, Patience::Forever, Some(timeout)).await
    }

    /// Runs one acquire watched on the handle's board, which `waiting()`
    /// reads; with a `timeout`, gives up with the error that says why.
    async fn watched(
        &self,
        m: usize,
        patience: Patience,
        timeout: Option<Duration>,
    ) -> Result<SemaphorePermit, Error> {
        let clock = &self.coord.clock;
        let watch = self.shared.board.begin(clock);
        watch.run(clock, timeout, self.take(m, patience)).await
    }

    /// Why the latest acquire of this handle (or a clone) is not granted
    /// yet, as [`DRWMutex::waiting`] says it for a lock. Of locks it waits
    /// on at once (the count and its check, the slots), the one the lockers
    /// cannot grant says why, else one held elsewhere; between two attempts
    /// at the count, what the last attempt saw. While it waits for a lock,
    /// its reason is the one [`acquire_timeout`](Self::acquire_timeout)
    /// would give up with then.
    ///
    /// `None` when no acquire of the handle waits for a lock: before one
    /// begins, after it ends, and once it holds every lock it needs and
    /// only confirms that its place in line was released (where
    /// `acquire_timeout` can still give up, with
    /// [`Error::QuorumUnavailable`], when the lockers do not answer).
    pub fn waiting(&self) -> Option<WaitStatus> {
        self.shared.board.status()
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name)
            .field("permits", &self.permits())
            .finish_non_exhaustive()
    }
}
