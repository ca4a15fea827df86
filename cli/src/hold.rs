//! `quorum-lock lock NAME`: take a lock, print what a script needs to use
//! it (its uid and fencing token), hold it until SIGINT or SIGTERM, then
//! release it; as `etcdctl lock NAME` does without a command.
//!
//! It is `run` without a command: the same connection, wait, exit codes
//! and lease. What stops the work when the lock is lost is the operator's
//! business here, so a loss is reported at once (exit 79), and the lost
//! lock's entries are left to expire, so that whatever relied on it has
//! that long to stop before anyone else can be granted it.

use std::io::{self, Write};

use crate::args::HoldArgs;
use crate::client::finish_releases;
use crate::fail::{Failure, FAILURE, LOST};
use crate::signals::Signals;
use crate::target::{describe, take, Request, Taken};
use crate::waiting::Patience;

pub async fn hold(args: HoldArgs, mut signals: Signals) -> Result<u8, Failure> {
    let request = Request {
        client: &args.client,
        name: &args.name,
        read: args.read,
        permits: args.permits,
        patience: Patience::of(args.nonblock, args.timeout),
        validity: args.validity,
        grace: None,
        owner: args.owner.as_deref(),
        source: crate::words::source_of("lock", &[]),
        outcome: "nothing is held",
    };
    let (ds, guard) = match take(request, &mut signals).await? {
        Taken::Held { ds, guard, .. } => (ds, guard),
        Taken::Stopped(code) => return Ok(code),
    };
    let what = describe(&args.name, args.permits, guard.slot());
    let mut facts = vec![
        // As given, but it is printed: escaped like everything else.
        format!("name={}", crate::words::escaped(&args.name)),
        format!("uid={}", guard.uid()),
    ];
    match guard.fencing_token().await {
        Ok(token) => facts.push(format!("fencing_token={token}")),
        Err(err) => crate::words::warn(&format!("no fencing token for {what}: {err}")),
    }
    if let Some(slot) = guard.slot() {
        facts.push(format!("slot={slot}"));
    }
    if let Err(err) = print(&facts) {
        // Nobody can learn the lock's facts: release it rather than hold
        // it for a reader that is gone.
        let _ = guard.unlock().await;
        finish_releases(&ds).await;
        return Err(Failure::new(
            FAILURE,
            format!("cannot write to stdout ({err}); released {what}"),
        ));
    }
    tokio::select! {
        () = guard.lost() => {
            // Said at once, but the entries are not freed: whatever relied
            // on the lock learns of the loss only now, and needs the time
            // until they expire to stop. Releasing them would let the next
            // holder in at this very moment.
            std::mem::forget(guard);
            Err(Failure::new(
                LOST,
                format!(
                    "lost {what} (expired, forced open, or not confirmed by a quorum); \
                     whatever relied on it is no longer protected, and the lock can be \
                     granted again once its entries expire"
                ),
            ))
        }
        stop = signals.recv() => {
            let released = guard.unlock().await;
            finish_releases(&ds).await;
            match released {
                Ok(()) => {
                    crate::words::say(&format!("{}: released {what}", stop.name()));
                    Ok(0)
                }
                Err(err @ quorum_lock::Error::LockLost) => {
                    Err(Failure::new(LOST, format!("{what}: {err}")))
                }
                Err(err) => {
                    crate::words::warn(&err.to_string());
                    Ok(0)
                }
            }
        }
    }
}

/// Writes the facts, one per line, and flushes: a script reading the pipe
/// sees them at once.
fn print(facts: &[String]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    for fact in facts {
        writeln!(out, "{fact}")?;
    }
    out.flush()
}
