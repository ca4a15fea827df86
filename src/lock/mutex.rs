//! `DRWMutex`: a distributed read/write mutex over one or more resource
//! names, and the retry loop that acquires it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use tracing::Instrument;

use crate::lock::acquisition::Acquisition;
use crate::lock::coordinator::Coordinator;
use crate::lock::keeper::Keeper;
use crate::lock::round::Round;
use crate::lock::telemetry::{outcome, AcquireRecord, Names};
use crate::lock::wait_round::{WaitEnd, WaitRound};
use crate::lock::wait_status::WaitStatus;
use crate::lock::wait_watch::{self, BoardWatch, Lane, WaitBoard};
use crate::locker::wait::Ticket;
use crate::{Error, LockMode, ReadGuard, Waiting, WriteGuard};

/// A read/write lock over a set of resource names, shared by every process
/// that uses the same lock servers. Made by [`Dsync::rw_mutex`](crate::Dsync::rw_mutex).
///
/// Many readers or one writer may hold it at a time. By default
/// ([`Waiting::Push`]) a waiter takes one place in line on every locker,
/// ordered by when it began to wait, and is granted in turn: first come,
/// first served, readers that queue together go together, and a waiting
/// writer stops readers that come after it, as in `tokio::sync::RwLock`.
/// The lockers push the grant, so the next waiter has the lock one message
/// after the holder let go. The handle itself holds nothing; it is cheap to
/// clone and to keep.
///
/// The lock is not reentrant: a task that holds it and asks again waits for
/// itself. Code that takes a lock it may already hold goes through a
/// [`Holder`](crate::Holder) instead.
///
/// ```
/// use std::sync::Arc;
/// use quorum_lock::{Dsync, Error, LocalLocker, NetLocker};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Error> {
/// let ds = Dsync::new((0..5).map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>).collect())?;
/// let mutex = ds.rw_mutex(["orders/17"])?;
///
/// let writer = mutex.lock().await?;
/// assert!(matches!(mutex.try_read().await, Err(Error::WouldBlock)));
/// writer.unlock().await?;
/// let reader = mutex.try_read().await?;
/// reader.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct DRWMutex {
    coord: Arc<Coordinator>,
    keeper: Arc<Keeper>,
    resources: Arc<[String]>,
    source: Arc<str>,
    /// Where this handle's waits say why they wait.
    board: Arc<WaitBoard>,
}

/// How long an acquire keeps trying.
#[derive(Clone, Copy)]
enum Patience {
    OneRound,
    Forever,
}

impl DRWMutex {
    pub(crate) fn new(
        coord: Arc<Coordinator>,
        keeper: Arc<Keeper>,
        resources: Arc<[String]>,
        source: Arc<str>,
    ) -> Self {
        DRWMutex {
            coord,
            keeper,
            resources,
            source,
            board: Arc::default(),
        }
    }

    /// The resource names, sorted and de-duplicated.
    pub fn resources(&self) -> &[String] {
        &self.resources
    }

    /// Why the latest wait of this handle (or a clone of it) is not
    /// granted yet: held elsewhere, lockers in quarantine after a restart,
    /// or too few reachable, with which lockers and why. `None` when no
    /// wait of this handle is running.
    ///
    /// Waits ([`lock`](Self::lock), [`read`](Self::read) and their
    /// `_timeout` forms) report here, and so do one-round `try_` calls
    /// while their round runs; when several run at once through the same
    /// handle, the one that began last among those still running reports
    /// (one that has not started its first round yet knows nothing, so
    /// the one before it does).
    /// A wait with a deadline that gives up fails with the error this
    /// status maps to (see [`WaitReason`](crate::WaitReason)).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use quorum_lock::{Dsync, LocalLocker, NetLocker, WaitReason};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), quorum_lock::Error> {
    /// let ds = Dsync::new((0..3).map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>).collect())?;
    /// let mutex = ds.rw_mutex(["reports"])?;
    /// let held = mutex.lock().await?;
    ///
    /// let waiter = mutex.clone();
    /// let wait = tokio::spawn(async move { waiter.lock().await });
    /// tokio::time::sleep(Duration::from_millis(100)).await;
    /// let status = mutex.waiting().expect("a wait is running");
    /// assert_eq!(status.reason(), WaitReason::HeldElsewhere);
    /// println!("waiting: {status}");
    ///
    /// drop(held);
    /// wait.await.expect("the wait ends")?.unlock().await?;
    /// assert!(mutex.waiting().is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn waiting(&self) -> Option<WaitStatus> {
        self.board.status()
    }

    /// The same names, shared: the key a reentrant holder files its hold
    /// under.
    pub(crate) fn resource_set(&self) -> &Arc<[String]> {
        &self.resources
    }

    /// The coordinator this mutex sends its calls through.
    pub(crate) fn coordinator(&self) -> &Arc<Coordinator> {
        &self.coord
    }

    /// A mutex on `resources` (sorted, without duplicates, valid) that
    /// shares this one's coordinator, keeper and source.
    pub(crate) fn sibling(&self, resources: Vec<String>) -> DRWMutex {
        DRWMutex::new(
            self.coord.clone(),
            self.keeper.clone(),
            resources.into(),
            self.source.clone(),
        )
    }

    /// Waits until the exclusive lock is granted.
    ///
    /// Waits in line (see [`Waiting`]) for as long as the lock is held
    /// elsewhere or the quorum is unreachable, so bound it with
    /// [`lock_timeout`](Self::lock_timeout) or `tokio::time::timeout` when
    /// waiting forever is not acceptable. Fails at once only on permanent
    /// errors, such as being called outside a tokio runtime.
    ///
    /// A wait whose grants all came too long ago for the lease to trust
    /// (a locker's replies were lost while its pushed grants arrived, or the
    /// task stalled) gives them back and waits again with the same place in
    /// line, so the guard it returns is never lost already.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe. Dropping the future at any point leaves no grant and no
    /// place in line behind: grants and places are released in the
    /// background, and calls still in flight release what they got when
    /// their answer arrives.
    pub async fn lock(&self) -> Result<WriteGuard, Error> {
        let (state, handle) = self.acquire(LockMode::Write, Patience::Forever).await?;
        Ok(WriteGuard::new(state, handle, self.keeper.clone()))
    }

    /// Waits until a shared lock is granted.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn read(&self) -> Result<ReadGuard, Error> {
        let (state, handle) = self.acquire(LockMode::Read, Patience::Forever).await?;
        Ok(ReadGuard::new(state, handle, self.keeper.clone()))
    }

    /// Makes one round for the exclusive lock.
    ///
    /// Fails with [`Error::WouldBlock`] when it is held elsewhere and with
    /// [`Error::QuorumUnavailable`] when too few lockers answered within
    /// `Timeouts::acquire`. Partial grants are released in the background.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_lock(&self) -> Result<WriteGuard, Error> {
        let (state, handle) = self.acquire(LockMode::Write, Patience::OneRound).await?;
        Ok(WriteGuard::new(state, handle, self.keeper.clone()))
    }

    /// Makes one round for a shared lock; fails as [`try_lock`](Self::try_lock).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_read(&self) -> Result<ReadGuard, Error> {
        let (state, handle) = self.acquire(LockMode::Read, Patience::OneRound).await?;
        Ok(ReadGuard::new(state, handle, self.keeper.clone()))
    }

    /// Like [`lock`](Self::lock), but gives up after `timeout`, with an
    /// error that says why it waited (see [`waiting`](Self::waiting)):
    /// [`Error::Timeout`] when the lock was held elsewhere (or lockers
    /// asked a moment before were still answering, see
    /// [`WaitReason::Answering`](crate::WaitReason::Answering)),
    /// [`Error::Quarantined`] when too many lockers were in quarantine
    /// after a restart, and [`Error::QuorumUnavailable`] when too few were
    /// reachable, naming each and why. A round still in flight at the
    /// deadline is abandoned and its grants are released.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn lock_timeout(&self, timeout: Duration) -> Result<WriteGuard, Error> {
        let (state, handle) = self.acquire_within(LockMode::Write, timeout).await?;
        Ok(WriteGuard::new(state, handle, self.keeper.clone()))
    }

    /// Like [`read`](Self::read), but gives up after `timeout` with the
    /// errors of [`lock_timeout`](Self::lock_timeout).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn read_timeout(&self, timeout: Duration) -> Result<ReadGuard, Error> {
        let (state, handle) = self.acquire_within(LockMode::Read, timeout).await?;
        Ok(ReadGuard::new(state, handle, self.keeper.clone()))
    }

    async fn acquire_within(
        &self,
        mode: LockMode,
        timeout: Duration,
    ) -> Result<(Arc<Acquisition>, Handle), Error> {
        let record = self.coord.telemetry.acquire(mode);
        let span = self.span(mode);
        let result = async {
            // Checked here too, because the timer below needs the runtime.
            Handle::try_current().map_err(|_| Error::NoRuntime)?;
            let watch = self.board.begin_lazily(&self.coord.clock);
            let lane = wait_watch::outer().map(|outer| outer.lane());
            let watches = Watches {
                board: &watch,
                operation: lane.as_ref(),
            };
            let rounds = watch.watching(self.rounds(mode, Patience::Forever, &record, watches));
            match self.coord.clock.timeout(timeout, rounds).await {
                Ok(result) => {
                    watches.ended(&result);
                    result
                }
                Err(_) => {
                    // Why it waited decides the error: held elsewhere,
                    // lockers in quarantine, or too few reachable.
                    let err = watch.gave_up();
                    tracing::debug!(?timeout, %err, "lock wait timed out");
                    Err(err)
                }
            }
        }
        .instrument(span.clone())
        .await;
        ended(&span, &result);
        record.finish(&result);
        result
    }

    async fn acquire(
        &self,
        mode: LockMode,
        patience: Patience,
    ) -> Result<(Arc<Acquisition>, Handle), Error> {
        let record = self.coord.telemetry.acquire(mode);
        let span = self.span(mode);
        // One-round tries report too: a clone of a reentrant holder that
        // waits behind one reads why from here.
        let watch = self.board.begin_lazily(&self.coord.clock);
        let lane = wait_watch::outer().map(|outer| outer.lane());
        let watches = Watches {
            board: &watch,
            operation: lane.as_ref(),
        };
        let result = watch
            .watching(self.rounds(mode, patience, &record, watches))
            .instrument(span.clone())
            .await;
        watches.ended(&result);
        ended(&span, &result);
        record.finish(&result);
        result
    }

    /// The span of one acquire; `uid` and `outcome` are filled in at the end.
    fn span(&self, mode: LockMode) -> tracing::Span {
        tracing::debug_span!(
            "acquire",
            resources = %Names(&self.resources),
            ?mode,
            uid = tracing::field::Empty,
            outcome = tracing::field::Empty,
        )
    }

    /// The rounds or waits of one acquire, each counted on `record`.
    async fn rounds(
        &self,
        mode: LockMode,
        patience: Patience,
        record: &AcquireRecord<'_>,
        watches: Watches<'_>,
    ) -> Result<(Arc<Acquisition>, Handle), Error> {
        let handle = Handle::try_current().map_err(|_| Error::NoRuntime)?;
        // In-process lockers answer without ever returning Pending, so a
        // task that locks in a loop would never give its worker back and
        // starve the refresh keeper and every other task on it. Spending
        // coop budget here yields once in a while, as tokio::sync does.
        tokio::task::coop::consume_budget().await;
        if matches!(patience, Patience::Forever) && self.coord.waiting == Waiting::Push {
            return self.wait_in_line(mode, handle, record, watches).await;
        }
        {
            let coord = &self.coord;
            let mut attempt = 0u32;
            loop {
                record.round();
                let mut round = Round::start(coord, &handle, &self.resources, &self.source, mode);
                watches.track(round.state());
                let span = tracing::debug_span!("round", uid = round.uid(), attempt);
                let err = match round.decide().instrument(span).await {
                    Ok(()) => {
                        tracing::debug!(uid = round.uid(), attempt, "lock granted");
                        return Ok((round.into_held(), handle));
                    }
                    Err(err) => err,
                };
                let uid = round.uid().to_owned();
                // Dropping the round releases its partial grants in the background.
                drop(round);
                if matches!(patience, Patience::OneRound) || !err.is_retryable() {
                    tracing::debug!(%uid, %err, "lock not granted");
                    return Err(err);
                }
                let wait = coord.backoff(attempt);
                tracing::debug!(%uid, %err, attempt, ?wait, "lock not granted, retrying");
                coord.clock.sleep(wait).await;
                attempt = attempt.saturating_add(1);
            }
        }
    }
}

impl DRWMutex {
    /// Waits with one ticket, starting a new wait each time an older waiter
    /// wounds this one, until a wait wins.
    async fn wait_in_line(
        &self,
        mode: LockMode,
        handle: Handle,
        record: &AcquireRecord<'_>,
        watches: Watches<'_>,
    ) -> Result<(Arc<Acquisition>, Handle), Error> {
        let ticket = Ticket::now();
        let mut wounds = 0u32;
        let mut refusals = 0u32;
        let mut stale = 0u32;
        loop {
            record.round();
            let mut wait = WaitRound::start(
                &self.coord,
                &handle,
                &self.resources,
                &self.source,
                mode,
                ticket,
            );
            watches.track(wait.state());
            let span = tracing::debug_span!("wait", uid = wait.uid(), wounds, stale);
            match wait.wait().instrument(span).await {
                Ok(()) => {
                    tracing::debug!(uid = wait.uid(), wounds, stale, "lock granted in line");
                    return Ok((wait.into_held(), handle));
                }
                Err(WaitEnd::Wounded) => {
                    tracing::debug!(
                        uid = wait.uid(),
                        "an older waiter needs our grants; stepping back"
                    );
                    wounds = wounds.saturating_add(1);
                }
                Err(WaitEnd::Stale) => {
                    tracing::debug!(
                        uid = wait.uid(),
                        "granted too long ago to be trusted; waiting again"
                    );
                    stale = stale.saturating_add(1);
                }
                Err(WaitEnd::Refused) => {
                    // Release before sleeping, as a failed polling round does.
                    drop(wait);
                    let pause = self.coord.backoff(refusals);
                    tracing::debug!(?pause, "refused by a locker without a queue; retrying");
                    self.coord.clock.sleep(pause).await;
                    refusals = refusals.saturating_add(1);
                }
                Err(WaitEnd::Failed(err)) => {
                    tracing::debug!(uid = wait.uid(), %err, "lock not granted");
                    return Err(err);
                }
            }
        }
    }
}

/// Where an acquire reports its rounds: the handle's own wait (for
/// [`DRWMutex::waiting`] and `lock_timeout`), and its lane in the operation
/// it is part of (a semaphore's acquire, a campaign, run with a deadline).
#[derive(Clone, Copy)]
struct Watches<'a> {
    board: &'a BoardWatch<'a>,
    operation: Option<&'a Lane>,
}

impl Watches<'_> {
    fn track(&self, state: &Arc<Acquisition>) {
        self.board.track(state);
        if let Some(lane) = self.operation {
            lane.track(state);
        }
    }

    /// Tells the operation this acquire is part of how it ended.
    fn ended(&self, result: &Result<(Arc<Acquisition>, Handle), Error>) {
        if let Some(lane) = self.operation {
            lane.ended(result);
        }
    }
}

/// Fills in how an acquire ended on its span.
fn ended(span: &tracing::Span, result: &Result<(Arc<Acquisition>, Handle), Error>) {
    span.record("outcome", outcome(result));
    if let Ok((state, _)) = result {
        span.record("uid", &*state.args.uid);
    }
}

impl fmt::Debug for DRWMutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DRWMutex")
            .field("resources", &self.resources)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}
