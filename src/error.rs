//! The one error type every fallible operation in this crate returns.

use std::time::Duration;

/// Everything that can go wrong while locking, unlocking or talking to a locker.
///
/// Each message says what happened and what the caller can do about it. The
/// enum is `#[non_exhaustive]`: later transports add variants, so match with a
/// wildcard arm.
///
/// ```
/// use quorum_lock::Error;
///
/// fn describe(err: &Error) -> &'static str {
///     match err {
///         Error::WouldBlock => "somebody else holds it; try again later",
///         Error::QuorumUnavailable { .. } => "too many lock servers are unreachable",
///         Error::Quarantined { .. } => "lock servers restarted; grants resume soon",
///         Error::Timeout => "gave up waiting while somebody else held it",
///         _ => "other",
///     }
/// }
/// assert_eq!(describe(&Error::Timeout), "gave up waiting while somebody else held it");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The caller passed something the library cannot lock: an empty resource
    /// list, an empty or over-long name, no lockers, and the like.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// One round found the lock held in a conflicting mode by someone else.
    /// Returned by `try_lock` and `try_read`; retry later or use `lock`/`read`.
    #[error("the lock is held by another owner; retry later or wait with lock()/read()")]
    WouldBlock,

    /// Fewer lockers answered than the quorum needs, so nothing could be
    /// decided: returned by one round (`try_lock`) and by a wait that ended
    /// (`lock_timeout`) while too few lockers were reachable. `unreachable`
    /// names each locker that did not answer and why.
    #[error(
        "only {answered} of {lockers} lockers answered but {quorum} are needed for a quorum{}; \
         check that enough lock servers are up and reachable",
        list_unreachable(unreachable)
    )]
    QuorumUnavailable {
        /// Lockers that gave an answer in time that counts towards the
        /// quorum or against it: a grant or a refusal of a lock, a refusal
        /// for a quarantine that still stands; for a fencing draw or a
        /// proclamation, a token drawn or a value stored (a locker that no
        /// longer holds the lock vouches for nothing, and is neither
        /// counted here nor named unreachable). Always below `quorum`.
        answered: usize,
        /// Answers the operation needed.
        quorum: usize,
        /// Lockers the coordinator talks to.
        lockers: usize,
        /// The lockers that did not answer, each with why, as far as known:
        /// the latest failure of a call to it.
        unreachable: Vec<Unreachable>,
    },

    /// Enough lockers are reachable, but too few of them grant because
    /// some restarted recently and refuse new grants until their
    /// quarantine ends (they may have forgotten locks they granted before
    /// the restart). Wait and try again: `left` says how long until enough
    /// of them are out of it, when the lockers said.
    #[error(
        "{} of {lockers} lockers are in quarantine after a restart ({}) and {quorum} are needed \
         for a quorum{}; new grants resume when it ends",
        quarantined.len(),
        quarantined.join(", "),
        left.map_or_else(String::new, |left| format!(", in {}", seconds(left)))
    )]
    Quarantined {
        /// The lockers in quarantine.
        quarantined: Vec<String>,
        /// How long until enough of them are out of quarantine for a
        /// quorum, if they said.
        left: Option<Duration>,
        /// Grants the operation needs.
        quorum: usize,
        /// Lockers the coordinator talks to.
        lockers: usize,
    },

    /// A wait with a deadline (`lock_timeout` and the like) gave up while a
    /// quorum of lockers was reachable and the lock was held elsewhere, or
    /// while lockers enough for a quorum, asked a moment before, were still
    /// answering (a deadline of a few round trips). A
    /// wait that gives up while a quorum is unreachable or in quarantine
    /// ends with [`QuorumUnavailable`](Error::QuorumUnavailable) or
    /// [`Quarantined`](Error::Quarantined) instead, so that "someone else
    /// has it" is never confused with "the cluster is down".
    #[error("timed out waiting for the lock: it is held elsewhere")]
    Timeout,

    /// An explicit unlock reached fewer lockers than the quorum. The release is
    /// still retried in the background, and stale entries expire on their own.
    #[error(
        "release confirmed by only {confirmed} of {lockers} lockers, {quorum} needed; \
         retrying in the background, the entries expire if the servers stay unreachable"
    )]
    ReleaseUnconfirmed {
        /// Lockers known not to hold the entry any more.
        confirmed: usize,
        /// Confirmations needed.
        quorum: usize,
        /// Lockers the coordinator talks to.
        lockers: usize,
    },

    /// [`Dsync::finish_releases`](crate::Dsync::finish_releases) reached
    /// its bound with releases still running: some lockers could not be
    /// told in time. They expire those entries by themselves, within the
    /// lease's validity.
    #[error(
        "{pending} releases were still running after {}; the lock servers that did not \
         confirm them expire those entries within the lease's validity",
        seconds(*waited)
    )]
    ReleasesPending {
        /// Releases still running.
        pending: usize,
        /// How long the call waited.
        waited: Duration,
    },

    /// The lock was lost while it was held: its entries expired, were forced
    /// open, or could not be confirmed by a quorum in time. Other clients may
    /// have held it since; treat the work done under it as unprotected.
    #[error("the lock was lost while held (expired, forced open, or unconfirmed by a quorum); redo or verify the protected work")]
    LockLost,

    /// A single locker call did not finish within its deadline.
    #[error("locker {endpoint} did not answer within {after:?}")]
    LockerTimeout {
        /// The locker that was slow.
        endpoint: String,
        /// How long the caller waited.
        after: Duration,
    },

    /// A locker could not be reached or failed while serving the call.
    #[error("locker {endpoint} failed: {reason}")]
    LockerUnavailable {
        /// The locker that failed.
        endpoint: String,
        /// What it reported.
        reason: String,
    },

    /// A lock server refused the connection's credentials. Check the token
    /// (and, for admin operations, that it is the admin token).
    #[error("lock server {endpoint} rejected the connection: {reason}; check the token")]
    Unauthorized {
        /// The server that refused.
        endpoint: String,
        /// What it said.
        reason: String,
    },

    /// TLS with a lock server failed over a certificate: the server refused
    /// this client's certificate, or wanted one and got none (mutual TLS),
    /// or this client refused the server's (not signed by a trusted CA, not
    /// for the host connected to, expired). The reason says which, and
    /// what to change: the CAs trusted (`ClientTls::new`), the client's
    /// certificate (`ClientTls::client_cert`), the name expected
    /// (`ClientTls::server_name`), or the server's certificate. Returned by
    /// `RemoteLocker::connect_error` and `net::connect_all` (feature
    /// `tls`); the locker keeps retrying, since a server may be given a new
    /// certificate.
    #[error("TLS with lock server {endpoint} failed: {reason}")]
    Tls {
        /// The server.
        endpoint: String,
        /// What failed, and what to change.
        reason: String,
    },

    /// A locker does not implement an optional capability, such as fencing
    /// tokens. Use lock servers of a version that does, or do without it.
    #[error("locker {endpoint} does not support {what}; upgrade it or do without {what}")]
    Unsupported {
        /// The locker that lacks it.
        endpoint: String,
        /// What it lacks.
        what: String,
    },

    /// A semaphore is held under another number of permits than this
    /// handle's: some process opened the same name with another `k`.
    /// Every process must open a semaphore with the same number of
    /// permits; this handle can take none until the other holders are
    /// gone. Returned by [`Semaphore`](crate::Semaphore)'s acquires.
    #[error(
        "semaphore {name:?} is held with {} permits, but this handle has {permits}; \
         every process must open it with the same number of permits",
        in_use.map_or_else(|| "another number of".to_string(), |n| n.to_string())
    )]
    PermitsMismatch {
        /// The semaphore's name.
        name: String,
        /// The permits this handle was opened with.
        permits: usize,
        /// The permits its holders opened it with, when they could be read.
        in_use: Option<usize>,
    },

    /// A read of an election's leader ([`Election::leader`](crate::Election::leader))
    /// heard from a quorum of lockers, but their answers did not settle
    /// who leads: the value of `term` is on `holding` of them, too few to
    /// confirm that its leader still leads and too many to rule it out (a
    /// resigned or cancelled leader's value can linger on a minority of
    /// lockers until it expires). The lockers that would settle it did not
    /// answer in time; `unreachable` names them. Retry when they answer.
    #[error(
        "could not tell whether term {term} still leads: {holding} of the {answered} lockers \
         that answered hold its value, {quorum} of {lockers} are needed to confirm it{}; \
         retry when more lock servers answer",
        list_unreachable(unreachable)
    )]
    LeaderUnsettled {
        /// The newest term in question.
        term: u64,
        /// Answers that hold its value.
        holding: usize,
        /// Lockers that answered in time.
        answered: usize,
        /// Answers that confirm a leader.
        quorum: usize,
        /// Lockers the coordinator talks to.
        lockers: usize,
        /// The lockers that did not answer, each with why, as far as known.
        unreachable: Vec<Unreachable>,
    },

    /// A read of an election found its leader (term `term` is on a write
    /// quorum of lockers) but no value of that leader on a write quorum:
    /// its last `proclaim` reached only some lockers (it failed, or is
    /// still on its way), so the lockers disagree on the value and none can
    /// be reported as the leader's. Retry: a later proclaim, or the
    /// re-sends of this one, settle it.
    #[error(
        "term {term} leads, but none of its values is on {quorum} of the {lockers} lockers \
         ({answered} answered): its last proclaim reached only some of them; retry once a \
         proclaim of the leader succeeds"
    )]
    LeaderValueUnsettled {
        /// The leading term.
        term: u64,
        /// Lockers that answered.
        answered: usize,
        /// Answers that confirm a value.
        quorum: usize,
        /// Lockers the coordinator talks to.
        lockers: usize,
    },

    /// The operation needs a tokio runtime (for timers and background release)
    /// but was polled outside one.
    #[error("no tokio runtime is running; call this from inside a tokio runtime")]
    NoRuntime,

    /// A [`Holder`](crate::Holder) that holds only the read lock of these
    /// resources asked for their write lock. Waiting would deadlock: the
    /// write lock cannot be granted while this holder's own read lock is
    /// held. Release every read guard of the lock first, then ask for the
    /// write lock; upgrades in place are not supported.
    #[error(
        "this holder holds only the read lock of [{}]; release it before asking for the \
         write lock (upgrades are not supported)",
        .resources.join(", ")
    )]
    UpgradeNotSupported {
        /// The resources of the lock, sorted.
        resources: Vec<String>,
    },
}

/// A locker that did not answer, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreachable {
    /// The locker, as its `endpoint()` names it.
    pub endpoint: String,
    /// Why, in words: its latest failure ("connection refused", "no answer
    /// within 2s"), or that it did not answer yet.
    pub reason: String,
}

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.endpoint, self.reason)
    }
}

/// ` (unreachable: a: why; b: why)`, or nothing for an empty list.
fn list_unreachable(unreachable: &[Unreachable]) -> String {
    if unreachable.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = unreachable.iter().map(ToString::to_string).collect();
    format!(" (unreachable: {})", parts.join("; "))
}

/// What a locker's refusal says when it refuses grants because it restarted
/// recently (its quarantine); `LocalLocker`, the lock server (which passes
/// its locker's message on) and `RedisLocker` all say it.
pub(crate) const QUARANTINE_REASON: &str = "refusing new grants";

/// What a locker's refusal of a fencing floor too far ahead of its clock
/// says; `LocalLocker` (so the lock server) and `RedisLocker` both say it.
pub(crate) const FLOOR_AHEAD_REASON: &str = "ahead of the clock of";

/// How a locker's failure begins when its call was never sent: the lock
/// server's client had no connection and could not make one, or a test
/// node refused the connection. Such a call cannot have changed anything
/// on the locker (see [`Error::never_sent`]).
pub(crate) const NOT_CONNECTED: &str = "not connected";
/// See [`NOT_CONNECTED`]: a connection attempt made for the call failed.
pub(crate) const CANNOT_CONNECT: &str = "cannot connect";
/// See [`NOT_CONNECTED`]: a test node refused the connection.
pub(crate) const CONNECTION_REFUSED_INJECTED: &str = "connection refused (injected fault)";

impl Error {
    /// Whether the call that failed with this error never reached its
    /// locker, so cannot have created or changed an entry there: no
    /// connection could be had for it, or TLS refused one. Anything else
    /// (a timeout, a connection that closed after the request was
    /// written, an error from a locker this crate does not know) may have
    /// been applied, and is taken as such.
    pub(crate) fn never_sent(&self) -> bool {
        match self {
            Error::LockerUnavailable { reason, .. } => {
                [NOT_CONNECTED, CANNOT_CONNECT, CONNECTION_REFUSED_INJECTED]
                    .iter()
                    .any(|start| reason.starts_with(start))
            }
            Error::Tls { .. } => true,
            _ => false,
        }
    }

    /// Whether a locker refused a fencing floor as too far ahead of its
    /// clock: a client pushed its counter, or the clocks disagree. Time
    /// mends the first, see `fence::draw_token`.
    pub(crate) fn is_floor_ahead(&self) -> bool {
        matches!(self, Error::InvalidArgument(reason) if reason.contains(FLOOR_AHEAD_REASON))
    }

    /// Whether a locker refused because it is in its quarantine after a
    /// restart.
    pub(crate) fn is_quarantine(&self) -> bool {
        matches!(self, Error::LockerUnavailable { reason, .. } if reason.contains(QUARANTINE_REASON))
    }

    /// The time a quarantine refusal says is left: the duration after
    /// "for another " in its reason, in Rust's `Debug` form (`55.9s`,
    /// `300ms`); `None` for other errors or when it says none.
    pub(crate) fn quarantine_time_left(&self) -> Option<Duration> {
        let Error::LockerUnavailable { reason, .. } = self else {
            return None;
        };
        let (_, rest) = reason.split_once("for another ")?;
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_len].parse().ok()?;
        let unit: String = rest[number_len..]
            .chars()
            .take_while(|c| c.is_alphabetic())
            .collect();
        let scale = match unit.as_str() {
            "s" => 1.0,
            "ms" => 1e-3,
            "µs" | "us" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        Duration::try_from_secs_f64(number * scale).ok()
    }

    /// Whether trying the same call again may succeed.
    ///
    /// Invalid arguments, a missing runtime, rejected credentials (token or
    /// TLS certificate) and missing capabilities are permanent until a
    /// setting changes, and an upgrade from a read to a write lock is
    /// refused until the caller itself releases its read lock; everything
    /// else can change as lock holders leave and servers come back.
    ///
    /// ```
    /// use quorum_lock::Error;
    /// assert!(Error::WouldBlock.is_retryable());
    /// assert!(!Error::InvalidArgument("empty name".into()).is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        !matches!(
            self,
            Error::InvalidArgument(_)
                | Error::NoRuntime
                | Error::Unauthorized { .. }
                | Error::Tls { .. }
                | Error::Unsupported { .. }
                | Error::PermitsMismatch { .. }
                | Error::UpgradeNotSupported { .. }
        )
    }

    /// Why a locker call failed, in words and without the endpoint (the
    /// caller names the locker).
    pub(crate) fn locker_reason(&self) -> String {
        match self {
            Error::LockerUnavailable { reason, .. } | Error::Tls { reason, .. } => reason.clone(),
            Error::LockerTimeout { after, .. } => {
                format!("no answer within {}", seconds(*after))
            }
            Error::Unauthorized { reason, .. } => format!("rejected the token: {reason}"),
            other => other.to_string(),
        }
    }

    pub(crate) fn invalid(reason: impl Into<String>) -> Self {
        Error::InvalidArgument(reason.into())
    }
}

/// A duration as an operator reads it: `56s`, `1.5s`, `250ms`.
pub(crate) fn seconds(d: Duration) -> String {
    if d >= Duration::from_secs(10) {
        let rounded = d
            .as_secs()
            .saturating_add(u64::from(d.subsec_millis() >= 500));
        format!("{rounded}s")
    } else if d >= Duration::from_secs(1) {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}ms", d.as_millis())
    }
}
