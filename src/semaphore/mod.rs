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
//!   `k` in binary, one name per digit (twice: `count-bit` for checks,
//!   `held` for reading a count out), and checks once, with the write lock
//!   on the flipped `count-bit` digits, that no holder spells another
//!   count. Two processes that open `N` with different `k` cannot both
//!   hold: the second gets [`Error::PermitsMismatch`].

mod names;
mod permit;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use futures::stream::{FuturesUnordered, StreamExt};

pub use names::{MAX_PERMITS, SEMAPHORE_PREFIX};
pub use permit::SemaphorePermit;

use crate::coordinator::Coordinator;
use crate::{DRWMutex, Error, ReadGuard, WriteGuard};
use names::{count_from, Names};

/// How many refused checks an acquirer makes before it probes the `held`
/// names for a holder of another count: a check is also refused by an
/// earlier acquirer's check on a locker that has not processed its release
/// yet, which the first retries outlast.
const COUNT_CHECKS: u32 = 3;

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
    /// One lock per flipped `held` digit, to read out another
    /// holder's count.
    other_held: Arc<[DRWMutex]>,
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
}

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
            slots: names.permits.into_iter().map(|p| mutex(vec![p])).collect(),
            count: mutex(names.count),
            other_held: names
                .other_held
                .iter()
                .map(|d| mutex(vec![d.clone()]))
                .collect(),
            other_counts: mutex(names.other_counts),
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
    /// when that is not acceptable. Fails at once with
    /// [`Error::PermitsMismatch`] when the semaphore is held under another
    /// number of permits, and on permanent errors.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe. Dropping the future leaves no permit, no place in line
    /// and no other lock behind: each is released in the background.
    pub async fn acquire(&self) -> Result<SemaphorePermit, Error> {
        self.take(1, Patience::Forever).await
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
        self.take(m, Patience::Forever).await
    }

    /// Makes one attempt at a permit: fails with [`Error::WouldBlock`] when
    /// all are held or somebody is waiting in line, and with
    /// [`Error::QuorumUnavailable`] when too few lockers answered.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire).
    pub async fn try_acquire(&self) -> Result<SemaphorePermit, Error> {
        self.take(1, Patience::OneRound).await
    }

    /// Makes one attempt at `m` permits together; fails as
    /// [`try_acquire`](Self::try_acquire).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire).
    pub async fn try_acquire_many(&self, m: usize) -> Result<SemaphorePermit, Error> {
        self.take(m, Patience::OneRound).await
    }

    /// Like [`acquire`](Self::acquire), but gives up with [`Error::Timeout`]
    /// after `timeout`, releasing whatever it had taken.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire).
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<SemaphorePermit, Error> {
        tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        match tokio::time::timeout(timeout, self.take(1, Patience::Forever)).await {
            Ok(result) => result,
            Err(_) => Err(Error::Timeout),
        }
    }

    async fn take(&self, m: usize, patience: Patience) -> Result<SemaphorePermit, Error> {
        if m == 0 || m > self.permits() {
            return Err(Error::invalid(format!(
                "asked for {m} permits of semaphore {:?}, which has {}; ask for 1 to {}",
                self.name,
                self.permits(),
                self.permits()
            )));
        }
        loop {
            let queue = match patience {
                Patience::Forever => self.queue.lock().await?,
                Patience::OneRound => self.queue.try_lock().await?,
            };
            let taking = async {
                if patience == Patience::Forever {
                    // The count first: a count that disagrees must be the
                    // answer before any slot is taken, and a head of the
                    // line is ready to wait on the slots one round later.
                    let (count, check) = match self.held_count() {
                        Some(count) => (count, None),
                        None => {
                            let (count, check) = self.join_count(patience).await?;
                            (self.keep_count(count), Some(check))
                        }
                    };
                    let (slots, ()) =
                        futures::join!(self.take_slots(m, patience), release_check_if(check));
                    return match slots {
                        Ok(slots) => self.renew_lost(m, count, slots).await,
                        Err(err) => {
                            release_shared(count).await;
                            Err(err)
                        }
                    };
                }
                // Both end after one round; a count that disagrees is the
                // answer to give even when the slots are all held too.
                let counting = async {
                    match self.held_count() {
                        Some(count) => Ok((count, None)),
                        None => {
                            let (count, check) = self.join_count(patience).await?;
                            Ok((self.keep_count(count), Some(check)))
                        }
                    }
                };
                let (counted, slots) = futures::join!(counting, self.take_slots(m, patience));
                match (counted, slots) {
                    (Ok((count, check)), Ok(slots)) => {
                        release_check_if(check).await;
                        if count.is_lost() || slots.iter().any(|(_, slot)| slot.is_lost()) {
                            // Lost between the two answers: one round is
                            // all a try makes.
                            futures::join!(
                                release_shared(count),
                                join_all(slots.into_iter().map(|(_, s)| release_check(s)))
                            );
                            return Err(Error::WouldBlock);
                        }
                        Ok((count, slots))
                    }
                    (Ok((count, check)), Err(err)) => {
                        futures::join!(release_shared(count), release_check_if(check));
                        Err(err)
                    }
                    (Err(err), Ok(slots)) => {
                        join_all(slots.into_iter().map(|(_, slot)| release_check(slot))).await;
                        Err(err)
                    }
                    (Err(err), Err(_)) => Err(err),
                }
            };
            let lost = queue.lost();
            let (count, slots) = tokio::select! {
                taken = taking => match taken {
                    Ok(taken) => taken,
                    Err(err) => {
                        release_line(queue).await;
                        return Err(err);
                    }
                },
                () = lost => {
                    // The line moved on without us (a partition, a stall):
                    // what we would take now could be an earlier waiter's
                    // turn. Give it all back and queue again.
                    tracing::debug!(semaphore = %self.name, "lost the place at the head of the line; queueing again");
                    if patience == Patience::OneRound {
                        return Err(Error::WouldBlock);
                    }
                    continue;
                }
            };
            release_line(queue).await;
            tracing::debug!(semaphore = %self.name, slots = slots.len(), "permits granted");
            return Ok(SemaphorePermit::new(self.name.clone(), slots, count));
        }
    }

    /// Takes again, still at the head of the line, any part of a permit
    /// that was lost while the rest was taken (a slot wait can last as long
    /// as the holders hold): an acquire never returns a lost permit, as a
    /// lock never returns a lost guard.
    async fn renew_lost(
        &self,
        m: usize,
        mut count: Arc<ReadGuard>,
        mut slots: Vec<(usize, WriteGuard)>,
    ) -> Result<(Arc<ReadGuard>, Vec<(usize, WriteGuard)>), Error> {
        loop {
            if count.is_lost() {
                tracing::debug!(semaphore = %self.name, "the count was lost while waiting for a slot; taking it again");
                let fresh = match self.held_count() {
                    Some(fresh) => Ok(fresh),
                    None => match self.join_count(Patience::Forever).await {
                        Ok((fresh, check)) => {
                            release_check(check).await;
                            Ok(self.keep_count(fresh))
                        }
                        Err(err) => Err(err),
                    },
                };
                match fresh {
                    Ok(fresh) => count = fresh,
                    Err(err) => {
                        join_all(slots.into_iter().map(|(_, s)| release_check(s))).await;
                        return Err(err);
                    }
                }
                continue;
            }
            if slots.iter().any(|(_, slot)| slot.is_lost()) {
                tracing::debug!(semaphore = %self.name, "a slot was lost while waiting for another; taking one again");
                // A lost slot's release runs in the background.
                slots.retain(|(_, slot)| !slot.is_lost());
                match self.take_slots(m - slots.len(), Patience::Forever).await {
                    Ok(more) => slots.extend(more),
                    Err(err) => {
                        join_all(slots.into_iter().map(|(_, s)| release_check(s))).await;
                        release_shared(count).await;
                        return Err(err);
                    }
                }
                continue;
            }
            return Ok((count, slots));
        }
    }

    /// The count's read lock that a permit of this handle holds now, if
    /// it is not lost. Reusing it is as safe as taking a new one: it was
    /// taken and checked by an acquirer at the head of the line, and every
    /// permit that shares it is lost when it is.
    fn held_count(&self) -> Option<Arc<ReadGuard>> {
        let kept = self
            .shared
            .count
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.upgrade().filter(|count| !count.is_lost())
    }

    /// Shares a newly taken count with the handle's later acquires.
    fn keep_count(&self, count: ReadGuard) -> Arc<ReadGuard> {
        let count = Arc::new(count);
        *self
            .shared
            .count
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::downgrade(&count);
        count
    }

    /// Takes the read lock on this handle's count after checking that
    /// nobody holds another; returns the check still held, for the caller
    /// to release (confirmed) before the line moves on, so that the next
    /// acquirer's check does not meet it.
    async fn join_count(&self, patience: Patience) -> Result<(ReadGuard, WriteGuard), Error> {
        let mut attempt = 0u32;
        loop {
            let (count, check) =
                futures::join!(self.count.try_read(), self.other_counts.try_lock());
            let failure = match (count, check) {
                (Ok(count), Ok(check)) => return Ok((count, check)),
                (Ok(count), Err(err)) => {
                    release_read(count).await;
                    err
                }
                (Err(err), Ok(check)) => {
                    release_check(check).await;
                    err
                }
                (Err(err), Err(_)) => err,
            };
            if failure != Error::WouldBlock {
                if patience == Patience::Forever && failure.is_retryable() {
                    tokio::time::sleep(self.coord.backoff(attempt)).await;
                    attempt = attempt.saturating_add(1);
                    continue;
                }
                return Err(failure);
            }
            attempt = attempt.saturating_add(1);
            if attempt >= COUNT_CHECKS {
                if let Some(in_use) = self.count_in_use().await {
                    return Err(Error::PermitsMismatch {
                        name: self.name.to_string(),
                        permits: self.permits(),
                        in_use: Some(in_use),
                    });
                }
                // Refused by checks, not holders: one left behind by an
                // acquirer whose release did not reach every locker (it
                // expires within the lease's validity).
                if patience == Patience::OneRound {
                    return Err(Error::WouldBlock);
                }
            }
            tokio::time::sleep(self.coord.backoff(attempt)).await;
        }
    }

    /// Reads out the count another holder holds, digit by digit, from the
    /// names only holders lock: `None` when no holder of another count
    /// refused any.
    async fn count_in_use(&self) -> Option<usize> {
        let digits = join_all(self.other_held.iter().map(DRWMutex::try_lock)).await;
        let refused: Vec<bool> = digits
            .iter()
            .map(|d| matches!(d, Err(Error::WouldBlock)))
            .collect();
        join_all(digits.into_iter().flatten().map(release_check)).await;
        refused
            .iter()
            .any(|&r| r)
            .then(|| count_from(self.permits(), &refused))
    }

    /// Takes `m` slots; called only by the head of the line.
    async fn take_slots(
        &self,
        m: usize,
        patience: Patience,
    ) -> Result<Vec<(usize, WriteGuard)>, Error> {
        if patience == Patience::OneRound {
            let tries = join_all(self.slots.iter().map(DRWMutex::try_lock)).await;
            let mut taken = Vec::with_capacity(m);
            let mut extra = Vec::new();
            let mut failure = Error::WouldBlock;
            for (slot, tried) in tries.into_iter().enumerate() {
                match tried {
                    Ok(guard) if taken.len() < m => taken.push((slot, guard)),
                    Ok(guard) => extra.push(guard),
                    Err(Error::WouldBlock) => {}
                    Err(err) => failure = err,
                }
            }
            if taken.len() < m {
                extra.extend(taken.drain(..).map(|(_, guard)| guard));
            }
            // Confirmed, so that the slots are free for the next attempt
            // when this call returns.
            join_all(extra.into_iter().map(release_check)).await;
            return if taken.len() == m {
                Ok(taken)
            } else {
                Err(failure)
            };
        }
        if m == 1 {
            // One slot first, in turn: when permits are free this costs one
            // call per locker where waiting on all of them costs `k`, and
            // `k - 1` releases after. When none is free it costs a round.
            let slot = self
                .shared
                .next_slot
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                % self.slots.len();
            match self.slots[slot].try_lock().await {
                Ok(guard) => return Ok(vec![(slot, guard)]),
                Err(err) if !err.is_retryable() => return Err(err),
                Err(_) => {}
            }
        }
        let mut waits: FuturesUnordered<_> = self
            .slots
            .iter()
            .enumerate()
            .map(|(slot, mutex)| async move { (slot, mutex.lock().await) })
            .collect();
        let mut taken = Vec::with_capacity(m);
        while let Some((slot, granted)) = waits.next().await {
            taken.push((slot, granted?));
            if taken.len() == m {
                // The other waits end here, releasing their places and any
                // grant that arrived meanwhile.
                return Ok(taken);
            }
        }
        Err(Error::WouldBlock)
    }
}

/// Releases the line and waits for the lockers to confirm. The next in
/// line is pushed its grant as soon as they process it; waiting makes a
/// `try_acquire` that follows this call find the line free.
async fn release_line(queue: WriteGuard) {
    if let Err(err) = queue.unlock().await {
        tracing::debug!(%err, "the release of the line is not confirmed yet");
    }
}

/// Releases a count that no permit will hold, if no other permit shares
/// it, confirmed.
async fn release_shared(count: Arc<ReadGuard>) {
    if let Ok(count) = Arc::try_unwrap(count) {
        release_read(count).await;
    }
}

/// Releases a count check, if one was taken.
async fn release_check_if(check: Option<WriteGuard>) {
    if let Some(check) = check {
        release_check(check).await;
    }
}

/// Releases a read lock of the count that will not be kept, confirmed.
async fn release_read(count: ReadGuard) {
    if let Err(err) = count.unlock().await {
        tracing::debug!(%err, "the release of a count is not confirmed yet");
    }
}

/// Releases a lock taken only to check (the count, or a slot beyond those
/// asked for) and waits for the lockers to confirm, so that the next
/// attempt, ours or the next acquirer's, does not meet it.
async fn release_check(check: WriteGuard) {
    if let Err(err) = check.unlock().await {
        tracing::debug!(%err, "the release of a check is not confirmed yet");
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
