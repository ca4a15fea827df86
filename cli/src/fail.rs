//! Exit codes and the one-line failure every subcommand reports. The codes
//! follow sysexits(3) where one fits, so that scripts can tell "held
//! elsewhere, try later" (75) from "the cluster is down" (69), "the lock
//! was lost under the command" (79) and "fix the configuration" (2, 77).
//! The table is printed by `run --help` (`EXIT_CODES` in args.rs) and in
//! the README; keep the three in step.

use std::fmt;

use quorum_lock::Error;

/// Something went wrong that has no more specific code (e.g. cannot bind).
pub const FAILURE: u8 = 1;
/// Bad command line or configuration: flags, durations, addresses, token
/// files, names, a semaphore opened with another number of permits.
pub const USAGE: u8 = 2;
/// Too few servers reachable for a quorum, or too many in quarantine after
/// a restart (EX_UNAVAILABLE): with `--timeout` or `--nonblock`, the
/// command never ran.
pub const UNAVAILABLE: u8 = 69;
/// The lock (or permit, or leadership) is held elsewhere: not granted
/// within `--timeout`, or at once with `--nonblock` (EX_TEMPFAIL). The
/// command never ran.
pub const HELD: u8 = 75;
/// A server rejected the token, or the token is not the admin token, or
/// TLS refused a certificate (EX_NOPERM).
pub const AUTH: u8 = 77;
/// The lock was lost while the command ran (expired, forced open, or not
/// confirmed by a quorum); the command was stopped. Outside sysexits(3)'s
/// range of meanings on purpose: no standard code says it.
pub const LOST: u8 = 79;
/// The command exists but cannot be executed (as in sh).
pub const CANNOT_EXECUTE: u8 = 126;
/// The command was not found (as in sh).
pub const NOT_FOUND: u8 = 127;

/// Why a subcommand stopped, with the exit code to report it under.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(USAGE, message)
    }
}

/// The message as the terminal may show it: it quotes what servers and
/// databases answered, so it is [`escaped`](crate::words::escaped).
impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::words::escaped(&self.message))
    }
}

/// Library errors carry their own advice in the message; this only picks
/// the code.
impl From<Error> for Failure {
    fn from(err: Error) -> Self {
        let code = match &err {
            Error::Unauthorized { .. } => AUTH,
            Error::QuorumUnavailable { .. }
            | Error::LeaderUnsettled { .. }
            | Error::LeaderValueUnsettled { .. }
            | Error::Quarantined { .. }
            | Error::LockerUnavailable { .. }
            | Error::LockerTimeout { .. }
            | Error::ReleaseUnconfirmed { .. }
            | Error::ReleasesPending { .. } => UNAVAILABLE,
            Error::Timeout | Error::WouldBlock => HELD,
            Error::LockLost => LOST,
            Error::Tls { .. } => AUTH,
            // Processes disagree on a semaphore's permits: a setting to fix.
            Error::InvalidArgument(_) | Error::PermitsMismatch { .. } => USAGE,
            _ => FAILURE,
        };
        Failure::new(code, err.to_string())
    }
}

/// Turns clap's multi-line report into one line ("error: ..." up to the
/// usage block), keeping the arguments it names.
pub fn one_line(clap_report: &str) -> String {
    let body = clap_report
        .split("\n\nUsage:")
        .next()
        .unwrap_or(clap_report)
        .split("\n\nFor more information")
        .next()
        .unwrap_or(clap_report);
    let joined: Vec<&str> = body
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let line = joined.join(" ");
    line.strip_prefix("error: ").unwrap_or(&line).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_reports_become_one_line() {
        let report = "error: the following required arguments were not provided:\n  --listen <ADDR>\n\nUsage: quorum-lock server --listen <ADDR>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(report),
            "the following required arguments were not provided: --listen <ADDR>"
        );
    }
}
