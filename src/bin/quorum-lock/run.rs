//! `quorum-lock run`: acquire, run the command, release; stop the command
//! if the lock is lost while it runs.

use std::time::Duration;

use quorum_lock::quorum::{read_quorum, write_quorum};
use quorum_lock::{DRWMutex, Dsync, Error, Lease, ReadGuard, Timeouts, WriteGuard};

use crate::args::RunArgs;
use crate::child::{exit_code, Job};
use crate::fail::{Failure, LOST_OR_TIMEOUT};
use crate::nodes::Cluster;
use crate::signals::{sys, Signals, Stop};

/// Either kind of guard; `run` treats them alike.
enum Guard {
    Write(WriteGuard),
    Read(ReadGuard),
}

impl Guard {
    fn uid(&self) -> String {
        match self {
            Guard::Write(g) => g.uid().to_owned(),
            Guard::Read(g) => g.uid().to_owned(),
        }
    }

    fn lost(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let token = match self {
            Guard::Write(g) => g.loss_token(),
            Guard::Read(g) => g.loss_token(),
        };
        token.cancelled_owned()
    }

    async fn unlock(self) -> Result<(), Error> {
        match self {
            Guard::Write(g) => g.unlock().await,
            Guard::Read(g) => g.unlock().await,
        }
    }
}

/// How the command's run ended.
enum Outcome {
    Exited(Result<std::process::ExitStatus, Failure>),
    Lost,
    Stopped(Stop),
}

pub async fn run(args: RunArgs, mut signals: Signals) -> Result<u8, Failure> {
    let quorum = if args.read { read_quorum } else { write_quorum };
    let cluster = tokio::select! {
        cluster = Cluster::connect(&args.client, false, quorum) => cluster?,
        stop = signals.recv() => return Ok(signalled(stop)),
    };
    let lease = lease_for(args.validity);
    let timeouts = Timeouts {
        // Both must stay well inside the lease for the library to accept it.
        acquire: Timeouts::default().acquire.min(lease.trusted_for() / 2),
        refresh: Timeouts::default().refresh.min(lease.trusted_for() / 2),
        ..Timeouts::default()
    };
    let mut builder = Dsync::builder(cluster.lockers.clone())
        .lease(lease)
        .timeouts(timeouts);
    if let Some(owner) = &args.owner {
        builder = builder.owner(owner.clone());
    }
    let ds = builder
        .build()
        .map_err(|e| Failure::usage(format!("bad settings: {e}")))?;
    let mutex = ds
        .rw_mutex([args.name.clone()])
        .map_err(|e| Failure::usage(format!("bad lock name '{}': {e}", args.name)))?;

    let guard = tokio::select! {
        guard = acquire(&mutex, args.read, args.timeout) => guard.map_err(|e| acquire_failure(e, &args, &cluster))?,
        stop = signals.recv() => {
            // The abandoned acquire releases its partial grants in the
            // background; give those calls a moment before the runtime ends.
            tokio::time::sleep(Duration::from_millis(200)).await;
            return Ok(signalled(stop));
        }
    };

    let uid = guard.uid();
    let env = [
        ("QUORUM_LOCK_NAME", args.name.as_str()),
        ("QUORUM_LOCK_UID", uid.as_str()),
    ];
    let mut job = match Job::spawn(&args.command, &env, !args.foreground) {
        Ok(job) => job,
        Err(failure) => {
            let _ = guard.unlock().await;
            return Err(failure);
        }
    };
    let outcome = tokio::select! {
        status = job.wait() => Outcome::Exited(status),
        () = guard.lost() => Outcome::Lost,
        stop = signals.recv() => Outcome::Stopped(stop),
    };
    match outcome {
        Outcome::Exited(status) => {
            let released = guard.unlock().await;
            let code = exit_code(status?);
            match released {
                Ok(()) => Ok(code),
                Err(Error::LockLost) => Err(Failure::new(
                    LOST_OR_TIMEOUT,
                    format!(
                        "the lock '{}' was lost just before the command exited (with code {code}); \
                         its work may not have been protected to the end",
                        args.name
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
        Outcome::Lost => {
            job.stop(sys::SIGTERM, args.grace).await?;
            drop(guard);
            Err(Failure::new(
                LOST_OR_TIMEOUT,
                format!(
                    "lost the lock '{}' while the command ran (expired, forced open, or not confirmed \
                     by a quorum); the command was stopped",
                    args.name
                ),
            ))
        }
        Outcome::Stopped(stop) => {
            job.stop(stop.number(), args.grace).await?;
            if let Err(err) = guard.unlock().await {
                eprintln!("quorum-lock: warning: {err}");
            }
            eprintln!(
                "quorum-lock: {}: stopped the command and released the lock",
                stop.name()
            );
            Ok(signalled(stop))
        }
    }
}

/// The lease for a validity: refresh every sixth of it, and give up a sixth
/// before the servers could expire the entries, the library's default ratio.
fn lease_for(validity: Duration) -> Lease {
    Lease {
        validity,
        refresh_interval: validity / 6,
        safety_margin: validity / 6,
    }
}

async fn acquire(mutex: &DRWMutex, read: bool, timeout: Option<Duration>) -> Result<Guard, Error> {
    Ok(match (read, timeout) {
        (false, None) => Guard::Write(mutex.lock().await?),
        (false, Some(t)) => Guard::Write(mutex.lock_timeout(t).await?),
        (true, None) => Guard::Read(mutex.read().await?),
        (true, Some(t)) => Guard::Read(mutex.read_timeout(t).await?),
    })
}

fn acquire_failure(err: Error, args: &RunArgs, cluster: &Cluster) -> Failure {
    let Error::Timeout = err else {
        return Failure::from(err);
    };
    let down = cluster.down();
    let why = if down.is_empty() {
        "it is held elsewhere, or servers are in quarantine".to_owned()
    } else {
        format!(
            "it is held elsewhere, or too few servers are up (unreachable: {})",
            down.join(", ")
        )
    };
    let waited = humantime::format_duration(args.timeout.unwrap_or_default());
    Failure::new(
        LOST_OR_TIMEOUT,
        format!(
            "timed out after {waited} waiting for the lock '{}': {why}; the command was not run",
            args.name
        ),
    )
}

fn signalled(stop: Stop) -> u8 {
    (128 + stop.number()) as u8
}
