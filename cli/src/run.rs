//! `quorum-lock run`: acquire, run the command, release; stop the command
//! if the lock is lost while it runs.
//!
//! A lost lock is not free yet: the library declares the loss at least the
//! lease's safety margin (`--validity`/6) before any server can expire the
//! entries, and frees them itself only after that margin. The command must
//! be dead by then, or two commands run at once. So, counting from the
//! moment the loss is declared:
//!
//! ```text
//! 0                          SIGTERM to the command's process group
//! --grace                    SIGKILL to whatever is left of it
//! --grace + kill allowance   the command is dead and reaped
//! --validity/6               the earliest the lock can be granted again
//! ```
//!
//! [`grace_for`] refuses a `--grace` that does not fit in that margin.
//!
//! With `--permits K` the command runs under one of K permits of a
//! semaphore instead. A permit is a write lock on one slot of the
//! semaphore plus a read lock on its count, with the same lease, and it is
//! declared lost when either is: the same timeline holds.

use std::time::Duration;

use quorum_lock::quorum::{read_quorum, write_quorum};
use quorum_lock::{
    DRWMutex, Dsync, Error, Lease, ReadGuard, Semaphore, SemaphorePermit, Timeouts, WriteGuard,
};

use crate::args::RunArgs;
use crate::child::{exit_code, Ended, Job, Spawn};
use crate::fail::{Failure, LOST_OR_TIMEOUT, USAGE};
use crate::nodes::Cluster;
use crate::signals::{Signals, Stop};

/// What the command runs under: a lock of either kind, or a semaphore's
/// permit; `run` treats them alike.
enum Guard {
    Write(WriteGuard),
    Read(ReadGuard),
    Permit(SemaphorePermit),
}

impl Guard {
    fn uid(&self) -> String {
        match self {
            Guard::Write(g) => g.uid().to_owned(),
            Guard::Read(g) => g.uid().to_owned(),
            Guard::Permit(p) => p.uid().to_owned(),
        }
    }

    /// The permit's slot, in `0..K`; `None` for a lock.
    fn slot(&self) -> Option<usize> {
        match self {
            Guard::Permit(p) => p.slots().first().copied(),
            _ => None,
        }
    }

    fn lost(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let token = match self {
            Guard::Write(g) => g.loss_token(),
            Guard::Read(g) => g.loss_token(),
            Guard::Permit(p) => p.loss_token(),
        };
        token.cancelled_owned()
    }

    async fn fencing_token(&self) -> Result<u64, Error> {
        match self {
            Guard::Write(g) => g.fencing_token().await,
            Guard::Read(g) => g.fencing_token().await,
            Guard::Permit(p) => p.fencing_token().await,
        }
    }

    async fn unlock(self) -> Result<(), Error> {
        match self {
            Guard::Write(g) => g.unlock().await,
            Guard::Read(g) => g.unlock().await,
            Guard::Permit(p) => p.unlock().await,
        }
    }
}

/// What `run` waits for: a lock on NAME, or one of the K permits of the
/// semaphore NAME.
enum Target {
    Lock { mutex: DRWMutex, read: bool },
    Permit(Semaphore),
}

impl Target {
    fn new(ds: &Dsync, args: &RunArgs) -> Result<Target, Failure> {
        match args.permits {
            None => {
                let mutex = ds.rw_mutex([args.name.clone()]).map_err(|e| {
                    Failure::usage(format!(
                        "bad lock name {}: {e}",
                        crate::words::shown(&args.name)
                    ))
                })?;
                Ok(Target::Lock {
                    mutex,
                    read: args.read,
                })
            }
            Some(k) => {
                let semaphore = ds.semaphore(&args.name, usize::from(k)).map_err(|e| {
                    Failure::usage(format!(
                        "bad semaphore name {}: {e}",
                        crate::words::shown(&args.name)
                    ))
                })?;
                Ok(Target::Permit(semaphore))
            }
        }
    }

    async fn acquire(&self, timeout: Option<Duration>) -> Result<Guard, Error> {
        let (mutex, read) = match self {
            Target::Lock { mutex, read } => (mutex, *read),
            Target::Permit(semaphore) => {
                return Ok(Guard::Permit(match timeout {
                    None => semaphore.acquire().await?,
                    Some(t) => semaphore.acquire_timeout(t).await?,
                }))
            }
        };
        Ok(match (read, timeout) {
            (false, None) => Guard::Write(mutex.lock().await?),
            (false, Some(t)) => Guard::Write(mutex.lock_timeout(t).await?),
            (true, None) => Guard::Read(mutex.read().await?),
            (true, Some(t)) => Guard::Read(mutex.read_timeout(t).await?),
        })
    }
}

/// How messages name what the command runs under: the lock, or the
/// permit in `slot` (any permit before one is granted).
fn held(args: &RunArgs, slot: Option<usize>) -> String {
    match (args.permits, slot) {
        (None, _) => format!("the lock '{}'", args.name),
        (Some(k), None) => format!("a permit of the semaphore '{}' ({k} permits)", args.name),
        (Some(k), Some(slot)) => format!(
            "permit {slot} of the semaphore '{}' ({k} permits)",
            args.name
        ),
    }
}

pub async fn run(args: RunArgs, mut signals: Signals) -> Result<u8, Failure> {
    // Refused before connecting when possible: bad flags should not cost a
    // server round.
    if let Some(validity) = args.validity {
        grace_for(args.grace, &lease_for(validity))?;
    }
    let quorum = if args.read { read_quorum } else { write_quorum };
    let cluster = tokio::select! {
        cluster = Cluster::connect(&args.client, false, quorum, args.validity) => cluster?,
        stop = signals.recv() => return Ok(signalled(stop)),
    };
    let Client { ds, lease, grace } =
        Client::new(&cluster, args.validity, args.grace, args.owner.as_deref())?;
    let ds = ds.with_source(crate::words::source_of("run", &args.command))?;
    let target = Target::new(&ds, &args)?;

    let acquired = tokio::select! {
        guard = target.acquire(args.timeout) => guard,
        stop = signals.recv() => {
            settle().await;
            return Ok(signalled(stop));
        }
    };
    let guard = match acquired {
        Ok(guard) => guard,
        Err(err) => {
            // A failed acquire releases what it took on the way (a place
            // in line, a semaphore's line or count check) in the
            // background; let that reach the nodes before exiting, or it
            // blocks the next run until it expires.
            settle().await;
            return Err(acquire_failure(err, &args, &cluster));
        }
    };

    let uid = guard.uid();
    let what = held(&args, guard.slot());
    let slot = guard.slot().map(|slot| slot.to_string());
    let token = match guard.fencing_token().await {
        Ok(token) => Some(token.to_string()),
        Err(err) => {
            // Old servers issue no tokens; the lock itself is still good.
            eprintln!(
                "quorum-lock: warning: no fencing token for '{}', so QUORUM_LOCK_FENCING_TOKEN \
                 is not set: {err}",
                args.name
            );
            None
        }
    };
    let env = [
        ("QUORUM_LOCK_NAME", Some(args.name.as_str())),
        ("QUORUM_LOCK_UID", Some(uid.as_str())),
        ("QUORUM_LOCK_FENCING_TOKEN", token.as_deref()),
        // Unset under a lock, so that an outer run's cannot pass for ours.
        ("QUORUM_LOCK_PERMIT_SLOT", slot.as_deref()),
    ];
    let how = Spawn {
        own_group: !args.foreground,
        // A run killed with SIGKILL cannot stop its command before the
        // lease runs out; the kernel does.
        die_with_parent: true,
    };
    let mut job = match Job::spawn(&args.command, &env, how) {
        Ok(job) => job,
        Err(failure) => {
            let _ = guard.unlock().await;
            return Err(failure);
        }
    };
    let ended = job
        .supervise(guard.lost(), &mut signals, grace, kill_allowance(&lease))
        .await?;
    match ended {
        Ended::Exited(status) => {
            let released = guard.unlock().await;
            let code = exit_code(status?);
            match released {
                Ok(()) => Ok(code),
                Err(Error::LockLost) => Err(Failure::new(
                    LOST_OR_TIMEOUT,
                    format!(
                        "{} was lost just before the command exited (with code {code}); \
                         its work may not have been protected to the end",
                        what
                    ),
                )),
                Err(err) => {
                    // The command ran under the lock; a slow release does not
                    // change its result, and the entries expire anyway.
                    eprintln!("quorum-lock: warning: {err}");
                    Ok(code)
                }
            }
        }
        Ended::Lost => {
            drop(guard);
            Err(Failure::new(
                LOST_OR_TIMEOUT,
                format!(
                    "lost {} while the command ran (expired, forced open, or not confirmed \
                     by a quorum); the command was stopped",
                    what
                ),
            ))
        }
        Ended::Stopped(stop) => {
            // The lock may have been lost during the grace too; the same
            // bound kept the command from outliving it.
            if let Err(err) = guard.unlock().await {
                eprintln!("quorum-lock: warning: {err}");
            }
            eprintln!(
                "quorum-lock: {}: stopped the command and released {}",
                stop.name(),
                match args.permits {
                    None => "the lock",
                    Some(_) => "the permit",
                }
            );
            Ok(signalled(stop))
        }
    }
}

/// The validity when neither `--validity` nor any server says one.
const DEFAULT_VALIDITY: Duration = Duration::from_secs(60);

/// The library client of `run` and `elect`, with the lease and grace their
/// flags and the servers decide.
pub struct Client {
    pub ds: Dsync,
    pub lease: Lease,
    /// Between SIGTERM and SIGKILL when the command must stop.
    pub grace: Duration,
}

impl Client {
    /// The lease is `--validity`, or else the shortest validity the
    /// servers announce, or 60 s; `grace` must fit in it ([`grace_for`]).
    pub fn new(
        cluster: &Cluster,
        validity: Option<Duration>,
        grace: Option<Duration>,
        owner: Option<&str>,
    ) -> Result<Client, Failure> {
        let announced = cluster.lockers.iter().filter_map(|l| l.validity()).min();
        let lease = lease_for(validity.or(announced).unwrap_or(DEFAULT_VALIDITY));
        let grace = grace_for(grace, &lease)?;
        let timeouts = Timeouts {
            // Both must stay well inside the lease for the library to accept it.
            acquire: Timeouts::default().acquire.min(lease.trusted_for() / 2),
            refresh: Timeouts::default().refresh.min(lease.trusted_for() / 2),
            ..Timeouts::default()
        };
        let mut builder = Dsync::builder(cluster.lockers.clone())
            .lease(lease)
            .timeouts(timeouts);
        if let Some(owner) = owner {
            builder = builder.owner(owner);
        }
        let ds = builder
            .build()
            .map_err(|e| Failure::usage(format!("bad settings: {e}")))?;
        Ok(Client { ds, lease, grace })
    }
}

/// Gives calls handed to the runtime in the background (the releases of
/// an abandoned acquire or campaign) a moment to reach the nodes before
/// the process ends; the library offers nothing to await them.
pub async fn settle() {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

/// The lease for a validity: refresh every sixth of it, and give up a sixth
/// before the servers could expire the entries, the library's default ratio.
pub fn lease_for(validity: Duration) -> Lease {
    Lease {
        validity,
        refresh_interval: validity / 6,
        safety_margin: validity / 6,
    }
}

/// The longest SIGKILL and reaping may take before the lock can be
/// freed: 1 s, or a quarter of the safety margin when that is shorter, so
/// that short test validities still leave room for a grace.
const KILL_ALLOWANCE: Duration = Duration::from_secs(1);

pub fn kill_allowance(lease: &Lease) -> Duration {
    KILL_ALLOWANCE.min(lease.safety_margin / 4)
}

/// The time between SIGTERM and SIGKILL: `--grace` if the command is then
/// still dead before the lock can be freed, or half the safety margin when
/// the flag is not given (5 s at the default `--validity` of 60 s).
pub fn grace_for(grace: Option<Duration>, lease: &Lease) -> Result<Duration, Failure> {
    let margin = lease.safety_margin;
    let allowance = kill_allowance(lease);
    let limit = margin.saturating_sub(allowance);
    let Some(grace) = grace else {
        return Ok(margin / 2);
    };
    if grace < limit {
        return Ok(grace);
    }
    let show = humantime::format_duration;
    Err(Failure::usage(format!(
        "--grace {} must be shorter than --validity/6 - {} = {}: a lost lock can be granted again \
         --validity/6 = {} after the loss, and the command must have been killed by then; \
         lower --grace or raise --validity",
        show(grace),
        show(allowance),
        show(limit),
        show(margin),
    )))
}

fn acquire_failure(err: Error, args: &RunArgs, cluster: &Cluster) -> Failure {
    if let Error::PermitsMismatch { in_use, .. } = err {
        let held_with = in_use.map_or_else(|| "another number of".to_owned(), |k| k.to_string());
        return Failure::new(
            USAGE,
            format!(
                "the semaphore '{}' is held with {held_with} permits, but --permits {} was \
                 given: every run on a semaphore must give the same --permits; the command was \
                 not run",
                args.name,
                args.permits.unwrap_or_default()
            ),
        );
    }
    let Error::Timeout = err else {
        return Failure::from(err);
    };
    let down = cluster.down();
    let held_elsewhere = match args.permits {
        None => "it is held elsewhere".to_owned(),
        Some(k) => format!("all {k} permits are held elsewhere"),
    };
    let why = if down.is_empty() {
        format!("{held_elsewhere}, or servers are in quarantine")
    } else {
        format!(
            "{held_elsewhere}, or too few servers are up (unreachable: {})",
            down.join(", ")
        )
    };
    let waited = humantime::format_duration(args.timeout.unwrap_or_default());
    Failure::new(
        LOST_OR_TIMEOUT,
        format!(
            "timed out after {waited} waiting for {}: {why}; the command was not run",
            held(args, None)
        ),
    )
}

/// The exit code after stopping for `stop`: 128+N, as a shell reports it.
pub fn signalled(stop: Stop) -> u8 {
    (128 + stop.number()) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn the_default_grace_leaves_room_before_the_lock_can_be_freed() {
        for validity in [secs(6), secs(12), secs(60), secs(600)] {
            let lease = lease_for(validity);
            let grace = grace_for(None, &lease).expect("the default fits");
            assert!(grace > Duration::ZERO);
            assert!(
                grace + kill_allowance(&lease) < lease.safety_margin,
                "{validity:?}"
            );
        }
        assert_eq!(grace_for(None, &lease_for(secs(60))).ok(), Some(secs(5)));
    }

    #[test]
    fn a_grace_that_outlasts_the_margin_is_refused() {
        let lease = lease_for(secs(12));
        let err = grace_for(Some(secs(10)), &lease).expect_err("10s > 2s");
        assert_eq!(err.code, crate::fail::USAGE);
        assert!(
            err.message
                .starts_with("--grace 10s must be shorter than --validity/6 - 500ms = 1s 500ms"),
            "{}",
            err.message
        );
        // Exactly at the limit leaves no room: refused.
        assert!(grace_for(Some(Duration::from_millis(1500)), &lease).is_err());
        assert_eq!(
            grace_for(Some(Duration::from_millis(1499)), &lease).ok(),
            Some(Duration::from_millis(1499))
        );
        // The old defaults, 10s with --validity 60s, had no room at all.
        assert!(grace_for(Some(secs(10)), &lease_for(secs(60))).is_err());
        assert!(grace_for(Some(secs(8)), &lease_for(secs(60))).is_ok());
    }
}
