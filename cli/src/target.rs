//! What `run` and `lock` take and hold: a lock on NAME (write or read) or
//! one of the K permits of the semaphore NAME, how they wait for it, and
//! what they say when they do not get it.

use std::time::Duration;

use quorum_lock::quorum::{read_quorum, write_quorum};
use quorum_lock::{
    DRWMutex, Dsync, Error, Lease, ReadGuard, Semaphore, SemaphorePermit, WaitStatus, WriteGuard,
};

use crate::args::ClientArgs;
use crate::client::{finish_releases, signalled, Client};
use crate::fail::{Failure, HELD, UNAVAILABLE, USAGE};
use crate::nodes::Cluster;
use crate::signals::Signals;
use crate::waiting::{self, Patience};

/// What is held: a lock of either kind, or a semaphore's permit; `run`
/// and `lock` treat them alike.
pub enum Guard {
    Write(WriteGuard),
    Read(ReadGuard),
    Permit(SemaphorePermit),
}

impl Guard {
    pub fn uid(&self) -> String {
        match self {
            Guard::Write(g) => g.uid().to_owned(),
            Guard::Read(g) => g.uid().to_owned(),
            Guard::Permit(p) => p.uid().to_owned(),
        }
    }

    /// The permit's slot, in `0..K`; `None` for a lock.
    pub fn slot(&self) -> Option<usize> {
        match self {
            Guard::Permit(p) => p.slots().first().copied(),
            _ => None,
        }
    }

    pub fn is_lost(&self) -> bool {
        match self {
            Guard::Write(g) => g.is_lost(),
            Guard::Read(g) => g.is_lost(),
            Guard::Permit(p) => p.is_lost(),
        }
    }

    pub fn lost(&self) -> impl std::future::Future<Output = ()> + Send + 'static + use<> {
        let token = match self {
            Guard::Write(g) => g.loss_token(),
            Guard::Read(g) => g.loss_token(),
            Guard::Permit(p) => p.loss_token(),
        };
        token.cancelled_owned()
    }

    pub async fn fencing_token(&self) -> Result<u64, Error> {
        match self {
            Guard::Write(g) => g.fencing_token().await,
            Guard::Read(g) => g.fencing_token().await,
            Guard::Permit(p) => p.fencing_token().await,
        }
    }

    pub async fn unlock(self) -> Result<(), Error> {
        match self {
            Guard::Write(g) => g.unlock().await,
            Guard::Read(g) => g.unlock().await,
            Guard::Permit(p) => p.unlock().await,
        }
    }
}

/// What is waited for: a lock on NAME, or one of the K permits of the
/// semaphore NAME.
pub enum Target {
    Lock { mutex: DRWMutex, read: bool },
    Permit(Semaphore),
}

impl Target {
    pub fn new(
        ds: &Dsync,
        name: &str,
        read: bool,
        permits: Option<u16>,
    ) -> Result<Target, Failure> {
        match permits {
            None => {
                let mutex = ds
                    .rw_mutex([name.to_owned()])
                    .map_err(|e| Failure::usage(format!("bad lock name: {e}")))?;
                Ok(Target::Lock { mutex, read })
            }
            Some(k) => {
                let semaphore = ds
                    .semaphore(name, usize::from(k))
                    .map_err(|e| Failure::usage(format!("bad semaphore name: {e}")))?;
                Ok(Target::Permit(semaphore))
            }
        }
    }

    /// Why the wait is not granted yet.
    pub fn waiting(&self) -> Option<WaitStatus> {
        match self {
            Target::Lock { mutex, .. } => mutex.waiting(),
            Target::Permit(semaphore) => semaphore.waiting(),
        }
    }

    /// Waits as `patience` says, printing why while it waits (see
    /// `waiting::reporting`); `what` names the lock in those lines.
    pub async fn acquire(&self, patience: Patience, what: &str) -> Result<Guard, Error> {
        let acquire = self.acquire_quietly(patience);
        match patience {
            Patience::OneRound => acquire.await,
            _ => waiting::reporting(what, acquire, || self.waiting()).await,
        }
    }

    async fn acquire_quietly(&self, patience: Patience) -> Result<Guard, Error> {
        let (mutex, read) = match self {
            Target::Lock { mutex, read } => (mutex, *read),
            Target::Permit(semaphore) => {
                return Ok(Guard::Permit(match patience {
                    Patience::OneRound => semaphore.try_acquire().await?,
                    Patience::Within(t) => semaphore.acquire_timeout(t).await?,
                    Patience::Forever => semaphore.acquire().await?,
                }))
            }
        };
        Ok(match (read, patience) {
            (false, Patience::OneRound) => Guard::Write(mutex.try_lock().await?),
            (false, Patience::Within(t)) => Guard::Write(mutex.lock_timeout(t).await?),
            (false, Patience::Forever) => Guard::Write(mutex.lock().await?),
            (true, Patience::OneRound) => Guard::Read(mutex.try_read().await?),
            (true, Patience::Within(t)) => Guard::Read(mutex.read_timeout(t).await?),
            (true, Patience::Forever) => Guard::Read(mutex.read().await?),
        })
    }
}

/// Refuses a name the library would refuse (empty, too long, control
/// characters) before connecting: a bad name must not wait for servers.
/// (A semaphore's names are longer by its prefix; `Target::new` checks
/// those.)
pub fn check_name(name: &str) -> Result<(), Failure> {
    refuse_node_url(name)?;
    let probe = quorum_lock::LockArgs {
        uid: "-".into(),
        resources: vec![name.to_owned()].into(),
        owner: "-".into(),
        source: "-".into(),
        quorum: 1,
    };
    probe
        .validate_resources()
        .map_err(|e| Failure::usage(format!("bad lock name: {e}")))
}

/// Refuses a node URL with a password typed where a lock name goes (its
/// flag left out, the nodes taken from a variable), which would be printed
/// whole; the error shows it only as redaction does. That is a name with
/// `://` that redaction changes, or one with user information (a `:`
/// before an `@`) or a query parameter named for a password
/// (`?password=…`), whatever its scheme became: a mistyped `postgres:/`
/// or `postgres//`, or none. Other names that hold `://`
/// (`s3://bucket/key`) or an `@` (`alice@build`) are names like any.
pub fn refuse_node_url(name: &str) -> Result<(), Failure> {
    let shown = crate::node_urls::shown(name);
    // A `:` before the last `@`: a user name may hold an `@` itself
    // (`app@tenant:pw@db`).
    let user_info = name
        .rsplit_once('@')
        .is_some_and(|(before, _)| before.contains(':'));
    // A password in a query parameter, named as the drivers take it
    // (`password`, Redis's `pass`, percent-encoded or not).
    let query_password = name.split_once('?').is_some_and(|(_, query)| {
        query.split('&').any(|pair| {
            pair.split_once('=').is_some_and(|(key, _)| {
                let key = percent_decoded(key).to_ascii_lowercase();
                key.contains("pass") || key.contains("pwd")
            })
        })
    });
    if (name.contains("://") && shown != name) || user_info || query_password {
        return Err(Failure::usage(format!(
            "bad lock name: {shown} looks like a node URL with a password; pass node URLs \
             with --nodes or --redis (or their variables), and the lock name after them"
        )));
    }
    Ok(())
}

/// `text` with its `%XX` escapes decoded (others left as they are).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |at: usize| {
            bytes
                .get(at)
                .and_then(|b| char::from(*b).to_digit(16))
                .and_then(|d| u8::try_from(d).ok())
        };
        match (bytes[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(high), Some(low)) => {
                out.push(high * 16 + low);
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// How messages name what is waited for: the lock, or the permit in
/// `slot` of a semaphore of `permits` (any permit before one is granted).
pub fn describe(name: &str, permits: Option<u16>, slot: Option<usize>) -> String {
    match (permits, slot) {
        (None, _) => format!("the lock '{name}'"),
        (Some(k), None) => format!("a permit of the semaphore '{name}' ({k} permits)"),
        (Some(k), Some(slot)) => format!("permit {slot} of the semaphore '{name}' ({k} permits)"),
    }
}

/// The failure for an acquire that did not get `what`, with the exit code
/// that says why (see fail.rs); `outcome` ends the message ("the command
/// was not run").
pub fn acquire_failure(
    err: Error,
    name: &str,
    permits: Option<u16>,
    patience: Patience,
    outcome: &str,
) -> Failure {
    let what = describe(name, permits, None);
    let held = match permits {
        None => "it is held elsewhere".to_owned(),
        Some(k) => format!("all {k} permits are held elsewhere, or others wait ahead"),
    };
    match err {
        Error::PermitsMismatch { in_use, .. } => {
            let held_with =
                in_use.map_or_else(|| "another number of".to_owned(), |k| k.to_string());
            Failure::new(
                USAGE,
                format!(
                    "the semaphore '{name}' is held with {held_with} permits, but --permits {} \
                     was given: every run on a semaphore must give the same --permits; {outcome}",
                    permits.unwrap_or_default()
                ),
            )
        }
        Error::Timeout => {
            let waited = match patience {
                Patience::Within(t) => humantime::format_duration(t).to_string(),
                _ => "the wait".to_owned(),
            };
            Failure::new(
                HELD,
                format!("timed out after {waited} waiting for {what}: {held}; {outcome}"),
            )
        }
        Error::WouldBlock => Failure::new(
            HELD,
            format!("{what} is not free (--nonblock): {held}; {outcome}"),
        ),
        err @ (Error::QuorumUnavailable { .. } | Error::Quarantined { .. }) => {
            let when = match patience {
                Patience::Within(t) => format!(" within {}", humantime::format_duration(t)),
                Patience::OneRound => " at once (--nonblock)".to_owned(),
                Patience::Forever => String::new(),
            };
            Failure::new(
                UNAVAILABLE,
                format!("could not get {what}{when}: {err}; {outcome}"),
            )
        }
        err => Failure::from(err),
    }
}

/// What `run` and `lock` ask for.
pub struct Request<'a> {
    pub client: &'a ClientArgs,
    pub name: &'a str,
    pub read: bool,
    pub permits: Option<u16>,
    pub patience: Patience,
    pub validity: Option<Duration>,
    pub grace: Option<Duration>,
    pub owner: Option<&'a str>,
    /// What `locks` shows as the lock's source.
    pub source: String,
    /// How a failure's message ends: what did not happen.
    pub outcome: &'static str,
}

/// How [`take`] ended when it did not fail.
pub enum Taken {
    /// Granted: the client, its lease and grace, and the guard.
    Held {
        ds: Dsync,
        lease: Lease,
        grace: Duration,
        guard: Guard,
    },
    /// A stop signal came first; exit with this code.
    Stopped(u8),
}

/// Checks the name, connects, and waits for the lock as `request` says,
/// until it is granted, a stop signal comes, or the wait fails; releases
/// what a wait that ended left in the background before returning.
pub async fn take(request: Request<'_>, signals: &mut Signals) -> Result<Taken, Failure> {
    let Request {
        client,
        name,
        read,
        permits,
        patience,
        validity,
        grace,
        owner,
        source,
        outcome,
    } = request;
    check_name(name)?;
    let quorum = if read { read_quorum } else { write_quorum };
    // A lock, or a semaphore, lives in the group of its name (as
    // `Groups::rw_mutex` and `Groups::semaphore` place it): only that
    // group of --nodes is connected.
    let group = crate::plan::group_of(client, name)?;
    let cluster = tokio::select! {
        cluster = Cluster::connect_for(&group.client, quorum, validity, patience) => cluster?,
        stop = signals.recv() => return Ok(Taken::Stopped(signalled(stop))),
    };
    let Client { ds, lease, grace } = Client::new(&cluster, validity, grace, owner)?;
    let ds = ds.with_source(source)?;
    let target = Target::new(&ds, name, read, permits)?;
    let waiting_for = describe(name, permits, None);
    let acquired = tokio::select! {
        guard = target.acquire(patience, &waiting_for) => guard,
        stop = signals.recv() => {
            finish_releases(&ds).await;
            return Ok(Taken::Stopped(signalled(stop)));
        }
    };
    match acquired {
        Ok(guard) => Ok(Taken::Held {
            ds,
            lease,
            grace,
            guard,
        }),
        Err(err) => {
            // A failed acquire releases what it took on the way (a place
            // in line, a semaphore's line or count check) in the
            // background; let that reach the nodes before exiting, or it
            // blocks the next one until it expires.
            finish_releases(&ds).await;
            Err(acquire_failure(err, name, permits, patience, outcome))
        }
    }
}
