//! Leader election on the quorum lock: `Election` (campaign, leader,
//! observe), the `Leadership` a winner holds, and the `Observer` stream.
//!
//! An election named `N` is the write lock on the resource `election/N`,
//! taken in line like any lock: first come, first served, with pushed
//! grants. The winner draws the lock's fencing token, which is its term,
//! and stores a [`Proclamation`] (term and value) with its entry on the
//! lockers; `leader()` and observers read it back from a quorum. So every
//! guarantee of the write lock carries over: one leader at a time while
//! the assumptions in the repository's docs/guarantees.md hold, a leader
//! that learns of its loss before anyone else can lead, terms that only
//! grow through locker restarts.

mod calls;
mod leadership;
mod observer;
mod tally;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use leadership::Leadership;
pub use observer::Observer;

use crate::lock::coordinator::Coordinator;
use crate::lock::wait_watch::give_up_after;
use crate::locker::proclamation::Proclamation;
use crate::quorum::write_quorum;
use crate::{DRWMutex, Error, LockArgs, WriteGuard};
use calls::{proclaim_round, read_round};

/// The prefix of the resource an election's lock is taken on.
pub const ELECTION_PREFIX: &str = "election/";

/// Who leads an election, as [`Election::leader`] and [`Observer`] report it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Leader {
    /// The leader's term: its fencing token, greater than every earlier
    /// leader's.
    pub term: u64,
    /// Which of this term's proclamations the value is; later ones are
    /// higher.
    pub seq: u64,
    /// The value the leader proclaimed.
    pub value: Arc<[u8]>,
}

impl Leader {
    /// The value as text, with invalid UTF-8 replaced.
    pub fn value_lossy(&self) -> String {
        String::from_utf8_lossy(&self.value).into_owned()
    }
}

impl From<Proclamation> for Leader {
    fn from(p: Proclamation) -> Self {
        Leader {
            term: p.term,
            seq: p.seq,
            value: p.value,
        }
    }
}

impl fmt::Display for Leader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "term {}: {}", self.term, self.value_lossy())
    }
}

/// An election among the processes that share a [`Dsync`](crate::Dsync)'s
/// lockers, made by [`Dsync::election`](crate::Dsync::election). The handle
/// holds nothing; it is cheap to clone.
///
/// ```
/// # use std::sync::Arc;
/// # use quorum_lock::{Dsync, LocalLocker, NetLocker};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), quorum_lock::Error> {
/// # let ds = Dsync::new((0..3).map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>).collect())?;
/// let election = ds.election("compactor")?;
/// let mut leading = election.campaign(&b"host-a:9000"[..]).await?;
/// assert_eq!(election.leader().await?.map(|l| l.term), Some(leading.term()));
///
/// leading.proclaim(&b"host-a:9001"[..]).await?;
/// assert_eq!(&election.leader().await?.unwrap().value[..], b"host-a:9001");
///
/// leading.resign().await?;
/// assert_eq!(election.leader().await?, None);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Election {
    name: Arc<str>,
    mutex: DRWMutex,
    coord: Arc<Coordinator>,
    /// Identifies this handle's reads to the lockers.
    source: Arc<str>,
}

/// How long a campaign keeps trying.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Patience {
    Once,
    Forever,
}

impl Election {
    pub(crate) fn new(
        name: &str,
        mutex: DRWMutex,
        coord: Arc<Coordinator>,
        source: Arc<str>,
    ) -> Self {
        Election {
            name: name.into(),
            mutex,
            coord,
            source,
        }
    }

    /// The election's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The resource its lock is taken on: `election/` and the name.
    pub fn resource(&self) -> &str {
        &self.mutex.resources()[0]
    }

    /// Waits in line until this candidate leads, then proclaims `value`.
    ///
    /// Returns once a write quorum of lockers granted the election's lock
    /// with time left on its lease, a fencing token (the term) was drawn,
    /// and a write quorum stored the proclamation. A candidate whose place
    /// in line is lost (a locker restarted, a connection dropped) takes it
    /// again with its next re-check, and one whose grant was lost before it
    /// could proclaim waits again, so it never returns leadership it does
    /// not hold and never drops out of the race silently. It fails only
    /// with errors that waiting cannot mend: [`Error::InvalidArgument`] for
    /// a value over [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN), or when the
    /// term (a fencing token) cannot be drawn because the lockers' wall
    /// clocks are more than [`FENCE_CLOCK_TOLERANCE`](crate::FENCE_CLOCK_TOLERANCE) apart (the error names
    /// the clocks; docs/guarantees.md, fencing tokens),
    /// [`Error::Unsupported`] when the lockers cannot hold an election,
    /// [`Error::NoRuntime`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped at any point, it leaves no place in line, grant
    /// or value on any locker (the outstanding calls finish on the runtime
    /// and undo what they did, as for [`DRWMutex::lock`]). A value that
    /// reached a write quorum before the drop is reported by observers
    /// until that undo lands.
    pub async fn campaign(&self, value: impl Into<Arc<[u8]>>) -> Result<Leadership, Error> {
        self.run(value.into(), Patience::Forever).await
    }

    /// Why a [`campaign`](Self::campaign) of this handle is not leading
    /// yet, as [`DRWMutex::waiting`] says it, while it waits for its lock;
    /// `None` when none waits. A limit: once the lock is granted, the
    /// campaign's steps until it leads (drawing its term, storing its
    /// value) have no status here, so it says `None` then too, also while
    /// those calls go unanswered and between losing the lock and waiting
    /// again. [`campaign_timeout`](Self::campaign_timeout) names the
    /// lockers that left them unanswered when it gives up.
    pub fn waiting(&self) -> Option<crate::WaitStatus> {
        self.mutex.waiting()
    }

    /// One attempt: leads now, or fails with [`Error::WouldBlock`] when
    /// another candidate leads or waits ahead.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`campaign`](Self::campaign).
    pub async fn try_campaign(&self, value: impl Into<Arc<[u8]>>) -> Result<Leadership, Error> {
        self.run(value.into(), Patience::Once).await
    }

    /// [`campaign`](Self::campaign) that gives up after `timeout`: with
    /// [`Error::Timeout`] when another candidate led or waited ahead (or
    /// the lockers were still answering), and
    /// with [`Error::Quarantined`] or [`Error::QuorumUnavailable`] when the
    /// lockers could not grant (see [`DRWMutex::lock_timeout`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`campaign`](Self::campaign).
    pub async fn campaign_timeout(
        &self,
        value: impl Into<Arc<[u8]>>,
        timeout: Duration,
    ) -> Result<Leadership, Error> {
        tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        let campaign = self.run(value.into(), Patience::Forever);
        give_up_after(&self.coord.clock, timeout, campaign).await
    }

    async fn run(&self, value: Arc<[u8]>, patience: Patience) -> Result<Leadership, Error> {
        // Checked before taking any place in line.
        Proclamation::new(0, 0, value.clone())?;
        let mut attempt = 0u32;
        loop {
            let guard = match patience {
                Patience::Forever => self.mutex.lock().await?,
                Patience::Once => self.mutex.try_lock().await?,
            };
            // From here on only calls: a term and a proclamation.
            crate::lock::wait_watch::calls_only();
            match self.proclaim_first(&guard, &value).await {
                Ok(Some(p)) => return Ok(Leadership::new(guard, self.coord.clone(), p)),
                // Lost before it could lead: wait in line again.
                Ok(None) if patience == Patience::Forever => {
                    tracing::debug!(election = %self.name, "lost the lead before proclaiming; campaigning again");
                }
                Ok(None) => return Err(Error::LockLost),
                Err(err) => return Err(err),
            }
            drop(guard);
            tokio::time::sleep(self.coord.backoff(attempt)).await;
            attempt = attempt.saturating_add(1);
        }
    }

    /// Draws the term and stores the first proclamation, retrying what may
    /// mend while the lock is held. `None` when the lock was lost first.
    async fn proclaim_first(
        &self,
        guard: &WriteGuard,
        value: &Arc<[u8]>,
    ) -> Result<Option<Proclamation>, Error> {
        let mut attempt = 0u32;
        loop {
            if guard.is_lost() {
                return Ok(None);
            }
            if attempt > 0 {
                crate::lock::wait_watch::retrying();
            }
            let step = async {
                let term = guard.fencing_token().await?;
                let p = Proclamation::new(term, 0, value.clone())?;
                Ok::<_, Error>(
                    proclaim_round(&self.coord, guard.args(), &p)
                        .await?
                        .then_some(p),
                )
            };
            match step.await {
                Ok(Some(p)) if !guard.is_lost() => return Ok(Some(p)),
                Ok(_) | Err(Error::LockLost) => return Ok(None),
                Err(err) if err.is_retryable() => {
                    tracing::debug!(election = %self.name, %err, "cannot proclaim yet; retrying while the lock is held");
                    crate::lock::wait_watch::note_retry(&err);
                    tokio::time::sleep(self.coord.backoff(attempt)).await;
                    attempt = attempt.saturating_add(1);
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Who leads now: the leader whose proclamation a write quorum of
    /// lockers holds, or `None` when a write quorum answered and none
    /// does (nobody leads, or the leader has not proclaimed yet). The
    /// value reported is the one a write quorum holds. A value left on
    /// fewer lockers (by a resign or a cancelled campaign whose unlock
    /// missed them, or a `proclaim` that failed or is on its way) is never
    /// reported, so after a resign that returned `Ok`, this returns `None`
    /// or a newer leader, unless the network held a refresh back past the
    /// resign and it reached a locker that restarted after the resign
    /// (docs/election.md, "Late messages across a restart").
    ///
    /// Fails with [`Error::QuorumUnavailable`] when fewer than a write
    /// quorum answered, [`Error::LeaderValueUnsettled`] when the leader's
    /// term is on a write quorum but none of its proclamations (a value
    /// under one sequence number) is (its last proclaim, or the re-send of
    /// its value after a cancelled one, reached only some lockers), [`Error::LeaderUnsettled`] when a quorum answered
    /// but the lockers that would tell whether a value still leads did
    /// not, and [`Error::Unsupported`] when the lockers cannot hold an
    /// election.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn leader(&self) -> Result<Option<Leader>, Error> {
        let reading = read_round(&self.coord, &self.reader_args(), None).await?;
        Ok(reading.leader.map(Leader::from))
    }

    /// A stream of leader changes; see [`Observer`].
    ///
    /// Fails with [`Error::NoRuntime`] outside a tokio runtime.
    pub fn observe(&self) -> Result<Observer, Error> {
        Observer::start(self.coord.clone(), self.reader_args())
    }

    /// The arguments of a read: a fresh uid, which names the watch.
    fn reader_args(&self) -> LockArgs {
        LockArgs {
            uid: uuid::Uuid::new_v4().to_string().into(),
            resources: self.mutex.resources().to_vec().into(),
            owner: self.coord.owner.clone(),
            source: self.source.clone(),
            quorum: write_quorum(self.coord.lockers.len()),
        }
    }
}

impl fmt::Debug for Election {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Election")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}
