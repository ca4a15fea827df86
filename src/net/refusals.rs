//! Warnings about refused connections: at most one line per cause a
//! second, counting the refusals since the previous line of that cause,
//! so that a flood of connections cannot flood the log too. The metrics
//! count every refusal.

use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::labels::AuthRefusal;
use crate::locker::throttled::Throttled;

/// Why a connection was refused, one line of the log each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// The `Hello` carried neither token.
    Token,
    /// The `Hello` offered a protocol version this server does not speak.
    Version,
    /// The first frame was no `Hello`, or too large.
    Malformed,
    /// Nothing within the handshake timeout.
    Timeout,
    /// Part of a `Hello`, not all of it, within the handshake timeout.
    SlowHandshake,
    /// The TLS handshake failed over a certificate or the protocol.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    TlsFailed,
    /// No TLS handshake within the handshake timeout.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    TlsTimeout,
    /// A TLS handshake started but not finished within the handshake
    /// timeout.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    TlsSlow,
    /// A TLS handshake finished, and then no `Hello` within the handshake
    /// timeout.
    SilentAfterTls,
    /// Every slot, the admin reserve included, holds an authenticated
    /// connection.
    AllAuthenticated,
    /// Connections arrive faster than those closed to make room for them
    /// go away: a flood of peers that do not authenticate.
    Flood,
    /// Sent nothing within its grace at the door, while every slot was
    /// taken.
    SilentAtDoor,
    /// Silent at a full door, pushed out by a newer connection.
    DoorFull,
    /// Spoke, but found no slot at the door: none freed within twice the
    /// grace, or none when newer ones pushed it out of a full door.
    NoSlotAtDoor,
    /// The client token's `max_connections` are all in use.
    ClientsFull,
    /// The peer's address holds `max_connections_per_address` already.
    AddressFull,
    /// An authenticated connection sent a frame that could not be
    /// decoded, and was closed.
    Misbehaving,
}

const CAUSES: usize = 17;

impl Cause {
    fn index(self) -> usize {
        self as usize
    }
}

/// One throttle per [`Cause`].
#[derive(Default)]
pub(crate) struct RefusalLog {
    causes: Mutex<[Throttled; CAUSES]>,
}

impl RefusalLog {
    /// Counts one refusal for `cause`; when a line is due, the number of
    /// refusals it stands for (this one included), for the caller to
    /// write.
    pub(crate) fn due(&self, cause: Cause) -> Option<u64> {
        let mut causes = self.causes.lock().unwrap_or_else(PoisonError::into_inner);
        let mut due = None;
        causes[cause.index()].note(|since| due = Some(since));
        due
    }
}

/// Why [`Slot::admit`](super::state::Slot::admit) refused an authenticated connection.
pub(crate) struct Busy {
    pub(crate) cause: Cause,
    /// For the client, starting with [`BUSY`](super::wire::BUSY).
    pub(crate) reason: String,
}

/// Why a handshake was rejected.
pub(crate) enum Refused {
    /// No token, or no handshake.
    Auth {
        /// What the metrics count.
        why: AuthRefusal,
        /// What the log names.
        cause: Cause,
        /// What the peer is told.
        reason: String,
        /// What the log says instead, when it says more: the peer's own
        /// bytes quoted, with this server's secrets masked. Never sent to
        /// the peer, which could otherwise learn, by what is masked, which
        /// bytes belong to a token.
        logged: Option<String>,
    },
    /// A token, but no room for its role.
    Busy(Busy),
}

impl Refused {
    /// Refused for `why`, logged under the cause of that name.
    pub(crate) fn auth(why: AuthRefusal, reason: impl Into<String>) -> Refused {
        let cause = match why {
            AuthRefusal::Token => Cause::Token,
            AuthRefusal::Version => Cause::Version,
            AuthRefusal::Malformed => Cause::Malformed,
            AuthRefusal::Timeout => Cause::Timeout,
            AuthRefusal::Tls => Cause::TlsFailed,
        };
        Refused::Auth {
            why,
            cause,
            reason: reason.into(),
            logged: None,
        }
    }

    /// A first frame that was no handshake, sent by a client of another
    /// protocol: the peer is `told` what spoke, without its bytes; the log
    /// says `logged`, which quotes them.
    pub(crate) fn foreign(told: String, logged: String) -> Refused {
        Refused::Auth {
            why: AuthRefusal::Malformed,
            cause: Cause::Malformed,
            reason: told,
            logged: Some(logged),
        }
    }

    /// Part of a `Hello`, not all of it, within the handshake timeout:
    /// counted as a timeout, logged as a slow handshake.
    pub(crate) fn partial_hello() -> Refused {
        Refused::Auth {
            why: AuthRefusal::Timeout,
            cause: Cause::SlowHandshake,
            reason: "only part of a handshake in time".to_owned(),
            logged: None,
        }
    }

    /// Nothing within the handshake timeout after a finished TLS
    /// handshake: counted as a timeout, logged apart.
    pub(crate) fn silent_after_tls() -> Refused {
        Refused::Auth {
            why: AuthRefusal::Timeout,
            cause: Cause::SilentAfterTls,
            reason: "no handshake in time after TLS".to_owned(),
            logged: None,
        }
    }

    pub(crate) fn reason(&self) -> &str {
        match self {
            Refused::Auth { reason, .. } => reason,
            Refused::Busy(busy) => &busy.reason,
        }
    }

    /// Warns, throttled per cause, in words that name the cause.
    /// `timeout` is the server's handshake timeout, which a timed-out
    /// refusal names.
    pub(crate) fn log(&self, peer: SocketAddr, log: &RefusalLog, timeout: Duration) {
        let cause = match self {
            Refused::Auth { cause, .. } => *cause,
            Refused::Busy(busy) => busy.cause,
        };
        let Some(refused) = log.due(cause) else {
            return;
        };
        let reason = match self {
            Refused::Auth {
                logged: Some(logged),
                ..
            } => logged,
            _ => self.reason(),
        };
        // `refused` counts the rejections a line stands for: this one and
        // those of the same cause left out since the previous line.
        match cause {
            Cause::Token => tracing::warn!(%peer, refused,
                "rejected connections that presented an invalid token \
                 (`refused` counts them since the last such line)"),
            Cause::Version => tracing::warn!(%peer, refused, %reason,
                "rejected clients of a protocol version this server does not speak \
                 (`refused` counts them since the last such line)"),
            Cause::Timeout => tracing::warn!(%peer, refused, ?timeout,
                "no handshake within the handshake timeout: closed connections that sent \
                 nothing (`refused` counts them since the last such line)"),
            Cause::SilentAfterTls => tracing::warn!(%peer, refused, ?timeout,
                "closed connections that finished a TLS handshake and then sent no handshake \
                 within the handshake timeout: TLS health checks, or clients of another TLS \
                 service pointed at this port (`refused` counts them since the last such line)"),
            Cause::SlowHandshake => tracing::warn!(%peer, refused, ?timeout,
                "closed connections that sent only part of a handshake within the handshake \
                 timeout: slow or stalled clients, or peers holding connections open \
                 (`refused` counts them since the last such line)"),
            Cause::ClientsFull | Cause::AddressFull => tracing::warn!(%peer, refused, %reason,
                "rejected clients with a valid token for want of room \
                 (`refused` counts them since the last such line)"),
            _ => tracing::warn!(%peer, refused, %reason,
                "rejected connections whose first frame was no handshake \
                 (`refused` counts them since the last such line)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locker::throttled::EVERY;

    #[tokio::test(start_paused = true)]
    async fn one_line_per_cause_and_interval_counts_what_it_stands_for() {
        let log = RefusalLog::default();
        assert_eq!(log.due(Cause::Token), Some(1));
        for _ in 0..99 {
            assert_eq!(log.due(Cause::Token), None);
        }
        // Another cause has a throttle of its own.
        assert_eq!(log.due(Cause::Timeout), Some(1));
        tokio::time::advance(EVERY).await;
        assert_eq!(log.due(Cause::Token), Some(100));
        assert_eq!(log.due(Cause::Token), None);
    }

    #[test]
    fn every_cause_has_a_throttle() {
        assert_eq!(Cause::Misbehaving.index(), CAUSES - 1);
    }
}
