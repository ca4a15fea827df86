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

use quorum_lock::Error;

use crate::args::RunArgs;
use crate::child::{exit_code, Ended, Job, Outcome, Rest, Spawn};
use crate::client::{finish_releases, grace_for, kill_allowance, lease_for, signalled};
use crate::fail::{Failure, LOST};
use crate::signals::{Signals, Stop};
use crate::target::{describe, take, Request, Taken};
use crate::waiting::Patience;

pub async fn run(args: RunArgs, mut signals: Signals) -> Result<u8, Failure> {
    // Refused before connecting when possible: bad flags should not cost a
    // server round.
    if let Some(validity) = args.validity {
        grace_for(args.grace, &lease_for(validity))?;
    }
    let request = Request {
        client: &args.client,
        name: &args.name,
        read: args.read,
        permits: args.permits,
        patience: Patience::of(args.nonblock, args.timeout),
        validity: args.validity,
        grace: args.grace,
        owner: args.owner.as_deref(),
        source: crate::words::source_of("run", &args.command),
        outcome: "the command was not run",
    };
    let (ds, lease, grace, guard) = match take(request, &mut signals).await? {
        Taken::Held {
            ds,
            lease,
            grace,
            guard,
        } => (ds, lease, grace, guard),
        Taken::Stopped(code) => return Ok(code),
    };

    let uid = guard.uid();
    let what = describe(&args.name, args.permits, guard.slot());
    let slot = guard.slot().map(|slot| slot.to_string());
    let token = match guard.fencing_token().await {
        Ok(token) => Some(token.to_string()),
        Err(err) => {
            // Old servers issue no tokens; the lock itself is still good.
            crate::words::warn(&format!(
                "no fencing token for '{}', so QUORUM_LOCK_FENCING_TOKEN \
                 is not set: {err}",
                args.name
            ));
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
        pass_secrets: args.pass_secrets,
        database_secrets: crate::child::DatabaseSecrets::of(args.client.nodes.as_deref()),
    };
    let mut job = match Job::spawn(&args.command, &env, how) {
        Ok(job) => job,
        Err(failure) => {
            let _ = guard.unlock().await;
            return Err(failure);
        }
    };
    let supervised = job
        .supervise(guard.lost(), &mut signals, grace, kill_allowance(&lease))
        .await;
    let Outcome {
        ended,
        rest,
        late_stop,
    } = match supervised {
        Ok(outcome) => outcome,
        Err(failure) => {
            // The command could not be waited for, so it may still run:
            // the lock is not given back. It expires on the servers once
            // this process, which refreshes it, is gone.
            std::mem::forget(guard);
            return Err(failure);
        }
    };
    let it = match args.permits {
        None => "the lock",
        Some(_) => "the permit",
    };
    if matches!(ended, Ended::Lost) || guard.is_lost() {
        // Once the command and everything in its group are gone, letting
        // go of the guard frees the lost lock's entries at once instead of
        // after the safety margin, which only protects a holder still at
        // work. Whatever may still run (a --foreground command's children,
        // a process stuck in the kernel) gets the margin.
        if rest != Rest::Gone {
            tokio::time::sleep(lease.safety_margin).await;
        }
        drop(guard);
        finish_releases(&ds).await;
        return match ended {
            Ended::Lost => Err(Failure::new(
                LOST,
                format!(
                    "lost {what} while the command ran (expired, forced open, or not confirmed \
                     by a quorum); the command was stopped"
                ),
            )),
            Ended::Exited(status) => Err(lost_at_exit(&what, exit_code(status))),
            Ended::Stopped(stop) => {
                crate::words::warn(&format!("lost {what} while the command was stopped"));
                crate::words::say(&format!("{}: stopped the command", stop.name()));
                Ok(signalled(stop))
            }
        };
    }
    let stop = match ended {
        Ended::Stopped(stop) => Some(stop),
        _ => late_stop,
    };
    if rest == Rest::Stuck {
        // Held, but part of the group outlived SIGKILL and the operator
        // gave up waiting: releasing would let the next holder in beside
        // it. The lock is refreshed until this process exits, then expires.
        std::mem::forget(guard);
        let stop = stop.unwrap_or(Stop::Terminate);
        crate::words::say(&format!(
            "{}: left {it} to expire (--validity) instead of releasing it: \
             processes of the command's group are still alive after SIGKILL",
            stop.name()
        ));
        return Ok(signalled(stop));
    }
    let released = guard.unlock().await;
    if let Err(err) = &released {
        if stop.is_some() || !matches!(err, Error::LockLost) {
            // The command ran under the lock; a slow release does not
            // change its result, and the entries expire anyway.
            crate::words::warn(&err.to_string());
        }
        finish_releases(&ds).await;
    }
    match (ended, stop) {
        (ended, Some(stop)) => {
            let what_ran = match ended {
                Ended::Exited(_) => "what the command left running",
                _ => "the command",
            };
            crate::words::say(&format!(
                "{}: stopped {what_ran} and released {it}",
                stop.name()
            ));
            Ok(signalled(stop))
        }
        (Ended::Exited(status), None) => {
            let code = exit_code(status);
            match released {
                Err(Error::LockLost) => Err(lost_at_exit(&what, code)),
                _ => Ok(code),
            }
        }
        // A loss was dealt with above; a stop comes with its signal.
        (Ended::Lost | Ended::Stopped(_), None) => Err(Failure::new(
            LOST,
            format!("lost {what} while the command ran; the command was stopped"),
        )),
    }
}

/// Exit 79 for `what`, lost after the command exited with `code` but
/// before what it left running was gone.
pub fn lost_at_exit(what: &str, code: u8) -> Failure {
    Failure::new(
        LOST,
        format!(
            "{what} was lost just before the command and what it started had ended (the \
             command exited with code {code}); its work may not have been protected to the end"
        ),
    )
}
