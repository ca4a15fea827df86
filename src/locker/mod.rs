//! The contract between the coordinator and its lockers: the `NetLocker`
//! trait that every locker (in process, a lock server, Redis, SQL)
//! implements and the `LockInfo` it reports, the `LockArgs` sent with
//! each call (`args`), waiting in line
//! (`wait`), election values (`proclamation`), a locker that answers at
//! once (`immediate`) and how a locker's endpoint is shown (`redact`).

pub(crate) mod args;
pub(crate) mod immediate;
pub(crate) mod proclamation;
pub(crate) mod redact;
pub(crate) mod secrets;
pub(crate) mod throttled;
pub(crate) mod wait;

use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

// Used where a peer's text enters an error: the network, Redis and SQL
// lockers (each helper where it is used, so that every build with one
// feature uses what it imports).
#[cfg(feature = "net")]
pub(crate) use crate::locker::args::escape_peer_head;
#[cfg(any(
    feature = "net",
    feature = "redis",
    feature = "postgres",
    feature = "mysql"
))]
pub(crate) use crate::locker::args::escape_peer_text;
#[cfg(any(feature = "net", feature = "postgres", feature = "mysql"))]
pub(crate) use crate::locker::args::peer_text_head;
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) use crate::locker::args::unshowable_character;
use crate::locker::args::{LockArgs, LockMode};
use crate::locker::proclamation::{Proclamation, WatchArgs};
use crate::locker::wait::{WaitArgs, WaitReply};
use crate::Error;

/// One held entry, as reported by [`LocalLocker::snapshot`](crate::LocalLocker::snapshot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    /// The locked resource name.
    pub resource: String,
    /// The acquisition that holds it.
    pub uid: String,
    /// Who holds it (host and pid by default).
    pub owner: String,
    /// Where in the holder's code the lock was created.
    pub source: String,
    /// Read or write.
    pub mode: LockMode,
    /// When the entry was granted, on the monotonic clock.
    pub acquired: Instant,
    /// When the entry was last granted or refreshed, on the monotonic clock.
    pub refreshed: Instant,
}

impl LockInfo {
    /// How long ago the entry was granted.
    pub fn age(&self) -> Duration {
        self.acquired.elapsed()
    }

    /// What the entry costs in a listing, in bytes: its text, plus room
    /// for the lengths, the mode and two durations as the lock protocol
    /// encodes them (at most 43 bytes). Lock servers fill listing pages by
    /// it, and clients check pages by it.
    #[cfg_attr(not(feature = "net"), allow(dead_code))]
    pub(crate) fn listed_size(&self) -> usize {
        self.resource.len() + self.uid.len() + self.owner.len() + self.source.len() + 48
    }
}

/// One lock server, as seen by the [`Dsync`](crate::Dsync) coordinator.
///
/// Every call returns `Ok(true)` when the locker did what was asked,
/// `Ok(false)` when it answered but refused (the lock is held by someone
/// else, or the uid does not hold it), and `Err(_)` when it could not answer.
/// The coordinator treats an error as "unknown": the request may or may not
/// have been applied, so it later sends an unlock to be sure.
///
/// Implementations must make `lock`/`rlock` all-or-nothing over
/// `args.resources`, make repeated calls with the same uid idempotent, and
/// process one client's calls in the order they were sent.
///
/// Capabilities added later arrive as provided methods with default bodies,
/// so an implementation written for an older version keeps working:
/// [`lock_wait`](Self::lock_wait) (queues and pushed wake-ups) falls back to
/// a plain lock call that the coordinator repeats, and
/// [`fence`](Self::fence) (fencing tokens), [`proclaim`](Self::proclaim) and
/// [`leader`](Self::leader) (leader election) report that they are
/// unsupported, and [`immediate`](Self::immediate) (plain function calls
/// for a locker that never waits) offers nothing, so every call goes through
/// the async methods.
///
/// # Cancel safety
///
/// The coordinator drops a call at its deadline, and a caller may drop the
/// acquire that made it. Implementations must tolerate being dropped at any
/// await point: a request may then be applied or not, which the coordinator
/// already treats as "unknown" and answers with an unlock. `LocalLocker`
/// never awaits, so each of its calls is applied entirely or not at all.
///
/// ```
/// use std::sync::Arc;
/// use quorum_lock::{LocalLocker, NetLocker};
///
/// let lockers: Vec<Arc<dyn NetLocker>> =
///     (0..3).map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>).collect();
/// assert!(lockers.iter().all(|l| l.is_local() && l.is_online()));
/// ```
#[async_trait]
pub trait NetLocker: Send + Sync {
    /// Grants an exclusive lock on all of `args.resources` to `args.uid`.
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error>;

    /// Grants a shared lock on all of `args.resources` to `args.uid`.
    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error>;

    /// Releases the exclusive lock `args.uid` holds, and drops its place in
    /// line if it has one. `Ok(false)` if it holds no lock.
    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error>;

    /// Releases the shared lock `args.uid` holds, and drops its place in
    /// line if it has one. `Ok(false)` if it holds no lock.
    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error>;

    /// Marks the lock of `args.uid` as still in use. `Ok(false)` when the
    /// locker does not know the uid (it expired, was forced open, or the
    /// server restarted).
    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error>;

    /// Refreshes like [`refresh`](Self::refresh), telling the locker the
    /// mode the lock is held in. A locker that restarted and lost its table
    /// can then re-create the entry if the resources are free there. The
    /// coordinator always calls this method; the default forwards to
    /// `refresh`, which suits lockers that never re-grant.
    async fn refresh_mode(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        let _ = mode;
        self.refresh(args).await
    }

    /// Asks for the lock in `mode` as a waiter with a place in line.
    ///
    /// A locker with queues grants at once only when the resources are free
    /// for `mode` *and* no older conflicting waiter is queued on them;
    /// otherwise it keeps a place for `args.uid` ordered by `wait.ticket`,
    /// answers [`WaitReply::Queued`], and later grants the place when its
    /// turn comes and pushes [`PushEvent::Granted`](crate::PushEvent) through
    /// `wait.wake`. A request with a newer uid but the same ticket is the
    /// same waiter trying again (the coordinator does this, for the same
    /// names, after a wound): its places replace the older request's. A
    /// locker drops the older request's places at least on the names the
    /// newer one names; [`LocalLocker`](crate::LocalLocker) drops them on
    /// every name the older one named whenever the two share a name, and a
    /// lock server always for the waits of one connection, so that there a
    /// waiter's places never outlast its newest request. Repeating the call
    /// renews the place; [`unlock`](Self::unlock)/[`runlock`](Self::runlock)
    /// with the uid removes it. When `wait.ticket` is older than the ticket of
    /// a grant it waits behind, the locker pushes
    /// [`PushEvent::Wounded`](crate::PushEvent) to that grant's waiter.
    ///
    /// The default sends a plain [`lock`](Self::lock)/[`rlock`](Self::rlock)
    /// and answers [`WaitReply::Refused`] when it is not granted, so the
    /// coordinator polls lockers that have no queues.
    async fn lock_wait(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error> {
        let _ = wait;
        let granted = match mode {
            LockMode::Write => self.lock(args).await?,
            LockMode::Read => self.rlock(args).await?,
        };
        Ok(if granted {
            WaitReply::Granted
        } else {
            WaitReply::Refused
        })
    }

    /// Whether [`lock_wait`](Self::lock_wait) keeps places in line and
    /// pushes grants, rather than the polling default. A locker that says
    /// yes must also treat a `lock_wait` by a uid that already holds the
    /// lock as a refresh of its entries, since the coordinator then counts
    /// it as one; and must answer `Queued` or `Refused` only when the uid
    /// holds no entry there. The default, `false`, makes the coordinator
    /// renew the grants of a waiter with [`refresh_mode`](Self::refresh_mode).
    fn queues(&self) -> bool {
        false
    }

    /// The same locker's calls as plain functions, when it answers every
    /// call at once: see [`ImmediateLocker`](crate::ImmediateLocker).
    ///
    /// The coordinator then calls the locker directly for locks, waits,
    /// renewals and unlocks, without allocating or polling a future per
    /// call. The default, `None`, keeps every call on the async methods,
    /// which is right for any locker that waits for something.
    /// [`LocalLocker`](crate::LocalLocker) returns itself.
    fn immediate(&self) -> Option<&dyn crate::ImmediateLocker> {
        None
    }

    /// Draws a fencing token for the lock `args.uid` holds in `mode`.
    ///
    /// When `args.uid` holds every resource of `args.resources` here, the
    /// locker answers `Some(t)` with `t` at least `floor` and greater than
    /// every token it answered before on any of those resources, and
    /// remembers `t` as the resources' latest token. `None` when the uid
    /// does not hold them all (expired, released, forced open).
    ///
    /// A locker must keep its tokens increasing across restarts: one that
    /// forgets its counters starts them above anything it could have issued
    /// before, for example from the wall clock. The default reports that
    /// fencing is unsupported.
    async fn fence(
        &self,
        args: &LockArgs,
        mode: LockMode,
        floor: u64,
    ) -> Result<Option<u64>, Error> {
        let _ = (args, mode, floor);
        Err(Error::Unsupported {
            endpoint: self.endpoint(),
            what: "fencing tokens".into(),
        })
    }

    /// Stores `proclamation` with the exclusive entry that `args.uid` holds
    /// on the one resource of `args.resources` (an election's name), for
    /// [`leader`](Self::leader) to report.
    ///
    /// Answers `Ok(true)` when the entry now carries this proclamation or a
    /// newer one of the same uid ([`Proclamation::is_newer_than`]), and
    /// `Ok(false)` when the uid holds no exclusive entry there. The
    /// proclamation lives exactly as long as the entry: released, expired or
    /// forced open, it is gone. A locker in quarantine answers the
    /// quarantine error, as for every call that vouches for a grant, but
    /// may still store it on an entry it holds. Lockers must refuse a value
    /// longer than [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN). The default
    /// reports that election is unsupported.
    async fn proclaim(&self, args: &LockArgs, proclamation: &Proclamation) -> Result<bool, Error> {
        let _ = (args, proclamation);
        Err(Error::Unsupported {
            endpoint: self.endpoint(),
            what: "leader election".into(),
        })
    }

    /// The proclamation stored with the live exclusive entry on the one
    /// resource of `args.resources`, or `None` when the resource is free,
    /// held in read mode, or held by an entry that proclaimed nothing.
    ///
    /// `args.uid` identifies the observer asking. With `watch`, the locker
    /// also keeps a watch for that uid on the resource (replacing an older
    /// one of the same uid) and pushes
    /// [`PushEvent::Changed`](crate::PushEvent::Changed) once the answer may
    /// have changed: see [`WatchArgs`]. A locker in quarantine answers the
    /// quarantine error: it may have forgotten a proclamation that its
    /// leader still counts on. The default reports that election is
    /// unsupported.
    async fn leader(
        &self,
        args: &LockArgs,
        watch: Option<&WatchArgs>,
    ) -> Result<Option<Proclamation>, Error> {
        let _ = (args, watch);
        Err(Error::Unsupported {
            endpoint: self.endpoint(),
            what: "leader election".into(),
        })
    }

    /// Drops locks regardless of owner: the entries of `args.uid` when it is
    /// not empty, otherwise every entry on `args.resources`.
    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error>;

    /// Every entry this locker holds, for listings. The default reports
    /// that listing is not supported.
    async fn locks(&self) -> Result<Vec<LockInfo>, Error> {
        Err(Error::LockerUnavailable {
            endpoint: self.endpoint(),
            reason: "this locker cannot list its locks".into(),
        })
    }

    /// A human-readable address for logs and errors.
    fn endpoint(&self) -> String;

    /// Whether the locker is believed reachable right now.
    fn is_online(&self) -> bool;

    /// Whether the locker lives in this process.
    fn is_local(&self) -> bool;

    /// How long this locker keeps an entry that is not refreshed, when it
    /// knows. A [`Dsync`](crate::Dsync) refuses to build with a
    /// [`Lease::validity`](crate::Lease::validity) longer than any locker
    /// reports here, because a holder would then trust its lock after the
    /// locker had already freed it. The default, `None`, skips that check.
    fn validity(&self) -> Option<std::time::Duration> {
        None
    }
}
