//! `quorum-lock elect`: campaign for an election and run a command while
//! leading, stopping it when the leadership is lost, as `run` does under a
//! lock; or, with `--listen`, print each change of leader.
//!
//! A leadership is a write lock on `election/NAME` (see the library's
//! `Election`), so `run`'s timeline applies unchanged: the loss is declared
//! `--validity`/6 before any other candidate can be granted the lead, and
//! the command is dead by then (see run.rs).

use std::io::{self, Write};
use std::time::Duration;

use quorum_lock::quorum::write_quorum;
use quorum_lock::{Election, Error, Leader, Leadership, MAX_VALUE_LEN};

use crate::args::ElectArgs;
use crate::child::{exit_code, Ended, Job, Outcome, Rest, Spawn};
use crate::client::{finish_releases, grace_for, kill_allowance, lease_for, signalled, Client};
use crate::fail::{Failure, FAILURE, HELD, LOST, UNAVAILABLE};
use crate::nodes::Cluster;
use crate::signals::{Signals, Stop};
use crate::waiting;
use crate::waiting::Patience;

pub async fn elect(args: ElectArgs, signals: Signals) -> Result<u8, Failure> {
    if args.listen {
        listen(args, signals).await
    } else {
        campaign(args, signals).await
    }
}

/// Campaigns, runs the command while leading, resigns.
async fn campaign(args: ElectArgs, mut signals: Signals) -> Result<u8, Failure> {
    // Refused before connecting when possible, as in `run`.
    let value = args.value.clone().ok_or_else(|| {
        Failure::usage("no VALUE given: elect NAME VALUE -- CMD, or elect --listen NAME")
    })?;
    if value.len() > MAX_VALUE_LEN {
        return Err(Failure::usage(format!(
            "the value is {} bytes long; at most {MAX_VALUE_LEN} are allowed",
            value.len()
        )));
    }
    if let Some(validity) = args.validity {
        grace_for(args.grace, &lease_for(validity))?;
    }
    let patience = Patience::of(false, args.timeout);
    // An election lives in the group of its name, as `Groups::election`
    // places it; only that group is connected.
    let group = crate::plan::group_of(&args.client, &args.name)?;
    let cluster = tokio::select! {
        cluster = Cluster::connect_for(&group.client, write_quorum, args.validity, patience) => cluster?,
        stop = signals.recv() => return Ok(signalled(stop)),
    };
    let Client { ds, lease, grace } =
        Client::new(&cluster, args.validity, args.grace, args.owner.as_deref())?;
    let ds = ds.with_source(crate::words::source_of("elect", &args.command))?;
    let election = election(&ds, &args.name)?;
    tokio::select! {
        checked = check_support(&election) => checked?,
        stop = signals.recv() => return Ok(signalled(stop)),
    }

    let what = format!("the lead of '{}'", args.name);
    let campaign = campaign_for(&election, value, args.timeout);
    let campaigned = tokio::select! {
        leading = waiting::reporting(&what, campaign, || election.waiting()) => leading,
        stop = signals.recv() => {
            // The abandoned campaign undoes its place and grants in the
            // background.
            finish_releases(&ds).await;
            return Ok(signalled(stop));
        }
    };
    let mut leading = match campaigned {
        Ok(leading) => leading,
        Err(err) => {
            finish_releases(&ds).await;
            return Err(campaign_failure(err, &args));
        }
    };

    let term = leading.term();
    let term_text = term.to_string();
    let uid = leading.uid().to_owned();
    let env = [
        ("QUORUM_LOCK_NAME", Some(args.name.as_str())),
        ("QUORUM_LOCK_UID", Some(uid.as_str())),
        ("QUORUM_LOCK_FENCING_TOKEN", Some(term_text.as_str())),
        // Unset: an outer `run --permits`'s slot is not ours.
        ("QUORUM_LOCK_PERMIT_SLOT", None),
    ];
    let how = Spawn {
        own_group: !args.foreground,
        // A SIGKILLed elect cannot stop its command, and its lease runs out
        // without it: the kernel must.
        die_with_parent: true,
        pass_secrets: args.pass_secrets,
        database_secrets: crate::child::DatabaseSecrets::of(args.client.nodes.as_deref()),
    };
    let mut job = match Job::spawn(&args.command, &env, how) {
        Ok(job) => job,
        Err(failure) => {
            resign(&mut leading, &args.name).await;
            return Err(failure);
        }
    };
    let supervised = job
        .supervise(leading.lost(), &mut signals, grace, kill_allowance(&lease))
        .await;
    let Outcome {
        ended,
        rest,
        late_stop,
    } = match supervised {
        Ok(outcome) => outcome,
        Err(failure) => {
            // The command could not be waited for: kill it (kill_on_drop)
            // before anyone else may lead.
            drop(job);
            resign(&mut leading, &args.name).await;
            return Err(failure);
        }
    };
    let name = &args.name;
    if matches!(ended, Ended::Lost) || leading.is_lost() {
        // Lost already; resigning only frees what some nodes may still
        // hold, so that the next candidate need not wait for it. That it
        // may fail (the nodes may be out of reach) is no news. What may
        // still run of the command's group gets the safety margin first,
        // as in `run`.
        if rest != Rest::Gone {
            tokio::time::sleep(lease.safety_margin).await;
        }
        if let Err(err) = leading.resign().await {
            tracing::debug!(%err, "resigning a lost leadership was not confirmed");
        }
        drop(leading);
        finish_releases(&ds).await;
        return match ended {
            Ended::Lost => Err(Failure::new(
                LOST,
                format!(
                    "lost the leadership of '{name}' (term {term}) while the command ran \
                     (expired, forced open, or not confirmed by a quorum); the command was \
                     stopped"
                ),
            )),
            Ended::Exited(status) => Err(Failure::new(
                LOST,
                format!(
                    "lost the leadership of '{name}' (term {term}) just before the command and \
                     what it started had ended (the command exited with code {}); its work may \
                     not have been protected to the end",
                    exit_code(status)
                ),
            )),
            Ended::Stopped(stop) => {
                crate::words::warn(&format!(
                    "lost the leadership of '{name}' (term {term}) while \
                     the command was stopped"
                ));
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
        // Leading, but part of the group outlived SIGKILL and the operator
        // gave up waiting: resigning would let the next candidate lead
        // beside it. The lead is refreshed until this process exits, then
        // expires.
        std::mem::forget(leading);
        let stop = stop.unwrap_or(Stop::Terminate);
        crate::words::say(&format!(
            "{}: left the lead of '{name}' to expire (--validity) instead of \
             resigning: processes of the command's group are still alive after SIGKILL",
            stop.name()
        ));
        return Ok(signalled(stop));
    }
    resign(&mut leading, name).await;
    match (ended, stop) {
        (ended, Some(stop)) => {
            let what_ran = match ended {
                Ended::Exited(_) => "what the command left running",
                _ => "the command",
            };
            crate::words::say(&format!("{}: stopped {what_ran} and resigned", stop.name()));
            Ok(signalled(stop))
        }
        (Ended::Exited(status), None) => Ok(exit_code(status)),
        // A loss was dealt with above; a stop comes with its signal.
        (Ended::Lost | Ended::Stopped(_), None) => Err(Failure::new(
            LOST,
            format!(
                "lost the leadership of '{name}' (term {term}) while the command ran; the \
                 command was stopped"
            ),
        )),
    }
}

/// Prints the leader and then every change until SIGINT or SIGTERM.
async fn listen(args: ElectArgs, mut signals: Signals) -> Result<u8, Failure> {
    // An observer follows the election through outages: with too few
    // nodes it says so and waits for them, as a run without --timeout.
    let group = crate::plan::group_of(&args.client, &args.name)?;
    let cluster = tokio::select! {
        cluster = Cluster::connect_for(&group.client, write_quorum, args.validity, Patience::Forever) => cluster?,
        _ = signals.recv() => return Ok(0),
    };
    let Client { ds, .. } = Client::new(&cluster, args.validity, None, None)?;
    let election = election(&ds, &args.name)?;
    tokio::select! {
        checked = check_support(&election) => checked?,
        _ = signals.recv() => return Ok(0),
    }
    let mut observer = election.observe().map_err(Failure::from)?;
    let mut printed = Printed::default();
    loop {
        let change = tokio::select! {
            change = observer.recv() => change,
            _ = signals.recv() => return Ok(0),
        };
        let Some(change) = change else {
            return Err(Failure::new(
                FAILURE,
                "stopped observing the election: its task ended",
            ));
        };
        let Some(text) = printed.next(change.as_ref()) else {
            continue;
        };
        match write_line(&text) {
            Ok(()) => {}
            // Nobody reads any more (`| head -1`): not our failure.
            Err(err) if err.kind() == io::ErrorKind::BrokenPipe => return Ok(0),
            Err(err) => {
                return Err(Failure::new(
                    FAILURE,
                    format!("cannot write to stdout: {err}"),
                ))
            }
        }
    }
}

fn election(ds: &quorum_lock::Dsync, name: &str) -> Result<Election, Failure> {
    ds.election(name).map_err(|e| {
        Failure::usage(format!(
            "bad election name {}: {e}",
            crate::words::shown(name)
        ))
    })
}

/// Fails clearly when the nodes cannot hold an election (lock servers
/// older than protocol version 5), instead of waiting for ever. Any other
/// error is left to the campaign or the observer, which keep trying.
async fn check_support(election: &Election) -> Result<(), Failure> {
    match election.leader().await {
        Err(err @ Error::Unsupported { .. }) => Err(Failure::from(err)),
        Err(err) => {
            tracing::debug!(%err, "cannot read the leader yet; going on");
            Ok(())
        }
        Ok(_) => Ok(()),
    }
}

async fn campaign_for(
    election: &Election,
    value: String,
    timeout: Option<Duration>,
) -> Result<Leadership, Error> {
    let value = value.into_bytes();
    match timeout {
        Some(timeout) => election.campaign_timeout(value, timeout).await,
        None => election.campaign(value).await,
    }
}

fn campaign_failure(err: Error, args: &ElectArgs) -> Failure {
    let waited = humantime::format_duration(args.timeout.unwrap_or_default());
    match err {
        Error::Timeout => Failure::new(
            HELD,
            format!(
                "timed out after {waited} waiting to lead '{}': another candidate leads or \
                 waits ahead; the command was not run",
                args.name
            ),
        ),
        err @ (Error::QuorumUnavailable { .. } | Error::Quarantined { .. }) => Failure::new(
            UNAVAILABLE,
            format!(
                "could not lead '{}' within {waited}: {err}; the command was not run",
                args.name
            ),
        ),
        err => Failure::from(err),
    }
}

/// Resigns and waits until a quorum confirmed it; when none does, says so
/// (the leadership then expires on the nodes after the validity).
async fn resign(leading: &mut Leadership, name: &str) {
    if let Err(err) = leading.resign().await {
        crate::words::warn(&format!(
            "resigning from '{name}' was not confirmed ({err}); \
             the next candidate leads once the lease runs out"
        ));
    }
}

/// What `--listen` printed, so that it prints each leader state once.
#[derive(Default)]
struct Printed {
    /// The newest (term, seq) seen of a leader.
    newest: Option<(u64, u64)>,
    /// The last line printed.
    last: Option<String>,
}

impl Printed {
    /// The line to print for `change`, if it is one. The observer also
    /// reports a leader that proclaimed its value again (a proclamation
    /// of the same value, a re-send after one that was not confirmed):
    /// the same line, no change to a reader. And a leader no newer than
    /// one seen before is stale: after "no leader", the leader that
    /// resigned or lost its lease cannot lead again in the same term.
    fn next(&mut self, change: Option<&Leader>) -> Option<String> {
        if let Some(leader) = change {
            let at = (leader.term, leader.seq);
            if self.newest.is_some_and(|newest| at <= newest) {
                return None;
            }
            self.newest = Some(at);
        }
        let text = line(change);
        if self.last.as_ref() == Some(&text) {
            return None;
        }
        self.last = Some(text.clone());
        Some(text)
    }
}

/// The line `--listen` prints for a change: `term=T value=V`, or
/// `no leader`.
fn line(change: Option<&Leader>) -> String {
    match change {
        Some(leader) => format!(
            "term={} value={}",
            leader.term,
            crate::words::value_line(&leader.value)
        ),
        None => "no leader".to_owned(),
    }
}

/// Writes `text` and a newline to stdout and flushes, so that a reader of
/// a pipe sees each change at once.
fn write_line(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn leader(term: u64, value: &[u8]) -> Leader {
        at(term, 0, value)
    }

    fn at(term: u64, seq: u64, value: &[u8]) -> Leader {
        Leader {
            term,
            seq,
            value: Arc::from(value),
        }
    }

    #[test]
    fn listen_prints_each_leader_state_once_and_never_a_stale_one() {
        let mut printed = Printed::default();
        let seen: Vec<Option<String>> = [
            None,
            Some(at(5, 0, b"a")),
            // The same value proclaimed or re-sent again.
            Some(at(5, 1, b"a")),
            Some(at(5, 1, b"a")),
            Some(at(5, 2, b"b")),
            None,
            None,
            // A copy of the gone leader, left on one node: stale.
            Some(at(5, 2, b"b")),
            Some(at(5, 1, b"a")),
            Some(at(7, 0, b"a")),
            Some(at(6, 9, b"c")),
        ]
        .iter()
        .map(|change| printed.next(change.as_ref()))
        .collect();
        let lines: Vec<&str> = seen.iter().flatten().map(String::as_str).collect();
        assert_eq!(
            lines,
            [
                "no leader",
                "term=5 value=a",
                "term=5 value=b",
                "no leader",
                "term=7 value=a"
            ]
        );
    }

    #[test]
    fn listen_lines_are_one_per_change_and_parseable() {
        assert_eq!(
            line(Some(&leader(17, b"host-a:8080"))),
            "term=17 value=host-a:8080"
        );
        assert_eq!(line(None), "no leader");
        assert_eq!(line(Some(&leader(3, b""))), "term=3 value=");
        // Spaces and '=' stay: the value is the rest of the line.
        assert_eq!(
            line(Some(&leader(4, b"a b=c \xc3\xa9"))),
            "term=4 value=a b=c \u{e9}"
        );
    }
}
