//! `Dsync`: the coordinator that owns the lockers and settings and hands out
//! `DRWMutex` handles.

use std::fmt;
use std::panic::Location;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use tokio::runtime::Handle;

use crate::lock::coordinator::Coordinator;
use crate::lock::keeper::Keeper;
use crate::locker::args::validate_names;
use crate::quorum::clock::Clock;
use crate::quorum::{read_quorum, write_quorum};
use crate::{DRWMutex, Error, Lease, NetLocker, RetryPolicy, Timeouts, Waiting};

/// Coordinates locks over a fixed set of [`NetLocker`]s, one per lock server.
///
/// Every lock, unlock and refresh goes to all lockers in parallel; a write is
/// granted by [`write_quorum`](Dsync::write_quorum) of them and a read by
/// [`read_quorum`](Dsync::read_quorum). A `Dsync` is cheap to clone and can be
/// shared freely between tasks.
///
/// ```
/// use std::sync::Arc;
/// use quorum_lock::{Dsync, LocalLocker, NetLocker};
///
/// let lockers: Vec<Arc<dyn NetLocker>> =
///     (0..5).map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>).collect();
/// let ds = Dsync::new(lockers)?;
/// assert_eq!((ds.read_quorum(), ds.write_quorum()), (3, 3));
/// # Ok::<(), quorum_lock::Error>(())
/// ```
#[derive(Clone)]
pub struct Dsync {
    pub(crate) coord: Arc<Coordinator>,
    keeper: Arc<Keeper>,
    /// Recorded with every lock instead of the caller's location, when set.
    source: Option<Arc<str>>,
}

impl Dsync {
    /// A coordinator over `lockers` with default settings.
    ///
    /// Fails with [`Error::InvalidArgument`] when `lockers` is empty.
    pub fn new(lockers: Vec<Arc<dyn NetLocker>>) -> Result<Dsync, Error> {
        Self::builder(lockers).build()
    }

    /// A builder for a coordinator with custom owner, timeouts or retry policy.
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// use quorum_lock::{Dsync, LocalLocker, NetLocker, RetryPolicy, Timeouts};
    ///
    /// let lockers: Vec<Arc<dyn NetLocker>> = vec![Arc::new(LocalLocker::new())];
    /// let ds = Dsync::builder(lockers)
    ///     .owner("billing-worker-7")
    ///     .timeouts(Timeouts { acquire: Duration::from_millis(200), ..Timeouts::default() })
    ///     .retry(RetryPolicy { initial: Duration::from_millis(5), max: Duration::from_millis(200) })
    ///     .build()?;
    /// assert_eq!(ds.owner(), "billing-worker-7");
    /// # Ok::<(), quorum_lock::Error>(())
    /// ```
    pub fn builder(lockers: Vec<Arc<dyn NetLocker>>) -> DsyncBuilder {
        DsyncBuilder {
            lockers,
            owner: None,
            timeouts: Timeouts::default(),
            retry: RetryPolicy::default(),
            lease: Lease::default(),
            waiting: Waiting::default(),
            seed: None,
            clock: Clock::Tokio,
        }
    }

    /// Waits, at most `within`, until every release this client (and its
    /// clones) handed to the background has finished: the grants and
    /// places of abandoned waits (a `lock_timeout` that gave up, a dropped
    /// future), guards dropped without `unlock()`, the entries of lost
    /// locks, and unlocks being retried. Call it before the process exits,
    /// or the entries it leaves behind block other clients until they
    /// expire (up to the lease's validity).
    ///
    /// A lost lock's entries are normally kept for the lease's safety
    /// margin after the loss, so that the holder can stop its work first;
    /// once its guard is dropped (or `unlock()` returned
    /// [`Error::LockLost`]), the holder has stopped, and they are freed at
    /// once. So drop every guard, then call this: a lost lock whose guard
    /// is still held is not waited for (its clean-up waits for the margin
    /// or the guard, whichever comes first).
    ///
    /// A release whose task sits on a runtime that is no longer driven (a
    /// guard dropped as its `block_on` returned) is sent again from here,
    /// at once: an unlock goes by uid, so one sent twice frees nothing
    /// else. A watch on a lock call still on its way is left until that
    /// call must have ended (`Timeouts::acquire`, and a little).
    ///
    /// Fails with [`Error::ReleasesPending`] when releases are still
    /// running at the bound (a lock server is unreachable, say); the
    /// lockers expire what they could not be told. Locks still held are
    /// not released: drop or unlock their guards first.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use quorum_lock::{Dsync, LocalLocker, NetLocker};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), quorum_lock::Error> {
    /// let ds = Dsync::new((0..3).map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>).collect())?;
    /// let guard = ds.rw_mutex(["nightly-report"])?.lock().await?;
    /// drop(guard); // released in the background
    /// ds.finish_releases(Duration::from_secs(5)).await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it waits, and hands unlocks to drain tasks that go on
    /// without it.
    pub async fn finish_releases(&self, within: Duration) -> Result<(), Error> {
        let handle = Handle::try_current().map_err(|_| Error::NoRuntime)?;
        crate::lock::drain::finish(&self.coord, &handle, within).await
    }

    /// Grants a write lock needs: `⌊n/2⌋ + 1` of the `n` lockers.
    pub fn write_quorum(&self) -> usize {
        write_quorum(self.coord.lockers.len())
    }

    /// Grants a read lock needs: `⌈n/2⌉` of the `n` lockers.
    pub fn read_quorum(&self) -> usize {
        read_quorum(self.coord.lockers.len())
    }

    /// The lockers, in the order they were given.
    pub fn lockers(&self) -> &[Arc<dyn NetLocker>] {
        &self.coord.lockers
    }

    /// The owner recorded with every lock this coordinator takes.
    pub fn owner(&self) -> &str {
        &self.coord.owner
    }

    /// A read/write mutex over one or more resource names.
    ///
    /// The names are sorted and de-duplicated; all of them are locked together
    /// or none is. The caller's source location is recorded with every lock,
    /// so that listings show where a lock was taken.
    ///
    /// Fails with [`Error::InvalidArgument`] for an empty list, an empty name,
    /// a name over [`MAX_RESOURCE_NAME_LEN`](crate::MAX_RESOURCE_NAME_LEN)
    /// bytes, a name with a control character (a newline, say), or more
    /// than [`MAX_RESOURCES`](crate::MAX_RESOURCES) names.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use quorum_lock::{Dsync, Error, LocalLocker, NetLocker};
    /// # let ds = Dsync::new(vec![Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>])?;
    /// let m = ds.rw_mutex(["b", "a", "b"])?;
    /// assert_eq!(m.resources(), ["a", "b"]);
    /// assert!(matches!(ds.rw_mutex([""]), Err(Error::InvalidArgument(_))));
    /// # Ok::<(), Error>(())
    /// ```
    #[track_caller]
    pub fn rw_mutex<I, S>(&self, resources: I) -> Result<DRWMutex, Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let caller = Location::caller();
        let mut names: Vec<String> = resources.into_iter().map(Into::into).collect();
        names.sort_unstable();
        names.dedup();
        validate_names(&names)?;
        Ok(DRWMutex::new(
            self.coord.clone(),
            self.keeper.clone(),
            names.into(),
            crate::lock::source::or_caller(self.source.as_ref(), caller),
        ))
    }

    /// This coordinator, recording `source` as where each lock was taken
    /// (what listings show as its source) instead of the caller's
    /// `file:line:column`, for the handles made from the copy: mutexes,
    /// elections and semaphores. The copy shares everything else with this
    /// one, which keeps its own source. A command-line tool may record the
    /// command that holds the lock, a service the job.
    ///
    /// Fails with [`Error::InvalidArgument`] for an empty source, one over
    /// 512 bytes (the longest a lock server accepts), or one that listings
    /// could not show as it is ([`LockArgs::validate_text`](crate::LockArgs::validate_text)).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use quorum_lock::{Dsync, LocalLocker, NetLocker};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), quorum_lock::Error> {
    /// # let locker = Arc::new(LocalLocker::new());
    /// # let ds = Dsync::new(vec![locker.clone() as Arc<dyn NetLocker>])?;
    /// let nightly = ds.with_source("nightly invoice run")?;
    /// let guard = nightly.rw_mutex(["invoices"])?.lock().await?;
    /// assert_eq!(locker.locks().await?[0].source, "nightly invoice run");
    /// # drop(guard);
    /// assert!(ds.with_source("two\nlines").is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_source(&self, source: impl Into<String>) -> Result<Dsync, Error> {
        let source = source.into();
        crate::lock::source::check(&source)?;
        Ok(Dsync {
            source: Some(source.into()),
            ..self.clone()
        })
    }
}

impl Dsync {
    /// An election named `name` among every process that uses these
    /// lockers; see [`Election`](crate::Election). Its lock is taken on the
    /// resource `election/` + `name`, which listings show.
    ///
    /// Fails with [`Error::InvalidArgument`] for an empty name or one that
    /// makes the resource name too long.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use quorum_lock::{Dsync, LocalLocker, NetLocker};
    /// # let ds = Dsync::new(vec![Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>])?;
    /// assert_eq!(ds.election("scheduler")?.resource(), "election/scheduler");
    /// assert!(ds.election("").is_err());
    /// # Ok::<(), quorum_lock::Error>(())
    /// ```
    #[track_caller]
    pub fn election(&self, name: &str) -> Result<crate::Election, Error> {
        if name.is_empty() {
            return Err(Error::invalid("an election needs a name"));
        }
        let caller = Location::caller();
        let resource = format!("{}{name}", crate::election::ELECTION_PREFIX);
        validate_names(std::slice::from_ref(&resource))?;
        let source = crate::lock::source::or_caller(self.source.as_ref(), caller);
        let mutex = DRWMutex::new(
            self.coord.clone(),
            self.keeper.clone(),
            vec![resource].into(),
            source.clone(),
        );
        Ok(crate::Election::new(
            name,
            mutex,
            self.coord.clone(),
            source,
        ))
    }
}

impl Dsync {
    /// A counting semaphore named `name` with `permits` permits among every
    /// process that uses these lockers; see [`Semaphore`](crate::Semaphore).
    /// Its locks are taken on resources under `semaphore/` + `name`, which
    /// listings show: slot `i` is `semaphore/NAME/permit/i`.
    ///
    /// Fails with [`Error::InvalidArgument`] for an empty name, one that
    /// makes the resource names too long, or `permits` outside `1..=`
    /// [`MAX_PERMITS`](crate::MAX_PERMITS).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use quorum_lock::{Dsync, LocalLocker, NetLocker};
    /// # let ds = Dsync::new(vec![Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>])?;
    /// assert_eq!(ds.semaphore("payments", 4)?.permits(), 4);
    /// assert!(ds.semaphore("payments", 0).is_err());
    /// # Ok::<(), quorum_lock::Error>(())
    /// ```
    #[track_caller]
    pub fn semaphore(&self, name: &str, permits: usize) -> Result<crate::Semaphore, Error> {
        let source = crate::lock::source::or_caller(self.source.as_ref(), Location::caller());
        let mutex = |names: Vec<String>| {
            DRWMutex::new(
                self.coord.clone(),
                self.keeper.clone(),
                names.into(),
                source.clone(),
            )
        };
        crate::Semaphore::new(name, permits, self.coord.clone(), &mutex)
    }

    /// A new holder for reentrant locks: its clones are one holder, which
    /// may take a lock of this `Dsync` it already holds again without
    /// waiting; any other holder is another client. See
    /// [`Holder`](crate::Holder) for why identity is a handle rather than
    /// the thread or the task.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use quorum_lock::{Dsync, Error, LocalLocker, NetLocker};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Error> {
    /// # let ds = Dsync::new(vec![Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>])?;
    /// let mutex = ds.rw_mutex(["cache"])?;
    /// let (me, someone_else) = (ds.holder(), ds.holder());
    /// let first = me.lock(&mutex).await?;
    /// let again = me.clone().lock(&mutex).await?; // granted at once
    /// assert!(matches!(someone_else.try_lock(&mutex).await, Err(Error::WouldBlock)));
    /// drop((first, again));
    /// # Ok(())
    /// # }
    /// ```
    pub fn holder(&self) -> crate::Holder {
        crate::Holder::new(self.coord.clone())
    }
}

impl fmt::Debug for Dsync {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let endpoints: Vec<String> = self.coord.lockers.iter().map(|l| l.endpoint()).collect();
        f.debug_struct("Dsync")
            .field("lockers", &endpoints)
            .field("owner", &self.coord.owner)
            .field("timeouts", &self.coord.timeouts)
            .field("retry", &self.coord.retry)
            .field("lease", &self.coord.lease)
            .finish()
    }
}

/// Configures a [`Dsync`]; made by [`Dsync::builder`].
#[must_use = "a builder does nothing until .build() is called"]
pub struct DsyncBuilder {
    lockers: Vec<Arc<dyn NetLocker>>,
    owner: Option<String>,
    timeouts: Timeouts,
    retry: RetryPolicy,
    lease: Lease,
    waiting: Waiting,
    seed: Option<u64>,
    clock: Clock,
}

impl DsyncBuilder {
    /// Who the locks belong to, shown in listings. Default: `host:pid`.
    ///
    /// [`build`](Self::build) refuses an owner that listings could not
    /// show as it is: see [`LockArgs::validate_text`](crate::LockArgs::validate_text).
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Call deadlines. Default: [`Timeouts::default`].
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Backoff between failed attempts. Default: [`RetryPolicy::default`].
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Refresh cadence and loss detection. Default: [`Lease::default`]. The
    /// validity must not exceed the lockers' own validity.
    pub fn lease(mut self, lease: Lease) -> Self {
        self.lease = lease;
        self
    }

    /// How `lock()` and `read()` wait for a held lock. Default:
    /// [`Waiting::Push`], in line with pushed wake-ups.
    pub fn waiting(mut self, waiting: Waiting) -> Self {
        self.waiting = waiting;
        self
    }

    /// Seeds the backoff jitter, so that a test on a current-thread runtime
    /// with paused time replays the same schedule. Default: random.
    pub fn rng_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Runs the coordinator on `clock` instead of tokio's (feature
    /// `testing`): it measures its leases, deadlines, refreshes, waits and
    /// backoffs on it, and reads its wall clock (fencing floors) from it,
    /// so that a test can give each client a clock that runs fast, slow or
    /// with its wall clock off. See
    /// [`testing::DriftClock`](crate::testing::DriftClock).
    #[cfg(feature = "testing")]
    pub fn clock(mut self, clock: crate::testing::DriftClock) -> Self {
        self.clock = Clock::Drift(clock);
        self
    }

    /// Checks the settings and builds the coordinator.
    ///
    /// Fails with [`Error::InvalidArgument`], naming the relation that is
    /// broken, when there are no lockers, the owner is empty or holds a
    /// control character (or one that reverses or breaks lines), the lease or
    /// the timeouts are inconsistent (see [`Lease`] and [`Timeouts`]), or the
    /// lease's validity exceeds the validity a locker reports
    /// ([`NetLocker::validity`]).
    pub fn build(self) -> Result<Dsync, Error> {
        if self.lockers.is_empty() {
            return Err(Error::invalid("a Dsync needs at least one locker"));
        }
        self.lease.check()?;
        self.timeouts.check(&self.lease)?;
        for locker in &self.lockers {
            match locker.validity() {
                Some(validity) if validity < self.lease.validity => {
                    return Err(Error::invalid(format!(
                        "lease: validity ({:?}) must not exceed the validity of locker {} ({validity:?}), \
                         or a holder would trust its lock after that locker had freed it",
                        self.lease.validity,
                        locker.endpoint()
                    )))
                }
                _ => {}
            }
        }
        let given = self.owner.is_some();
        let owner = self.owner.unwrap_or_else(default_owner);
        if owner.is_empty() {
            return Err(Error::invalid("the owner must not be empty"));
        }
        // Refused here rather than by every locker on every call.
        crate::locker::args::validate_owner(&owner).map_err(|err| match given {
            true => err,
            false => Error::invalid(format!(
                "{err} (the default owner, made of the host name; set one with \
                 DsyncBuilder::owner)"
            )),
        })?;
        let rng = match self.seed {
            Some(seed) => SmallRng::seed_from_u64(seed),
            None => SmallRng::from_rng(&mut rand::rng()),
        };
        let mut coord = Coordinator::new(
            self.lockers,
            owner.into(),
            self.timeouts,
            self.retry,
            self.lease,
            self.waiting,
            rng,
        );
        coord.clock = self.clock;
        let keeper = Arc::new(Keeper::new(coord.clock.clone()));
        Ok(Dsync {
            coord: Arc::new(coord),
            keeper,
            source: None,
        })
    }
}

/// `host:pid`, with the host name from the kernel or the environment.
fn default_owner() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .unwrap_or_else(|| "unknown-host".to_owned());
    format!("{host}:{}", std::process::id())
}
