//! What a lock server's client logs about what the server sends,
//! throttled (see [`Throttled`](crate::locker::throttled::Throttled)).

use crate::locker::throttled::SharedThrottle;

/// What a lock server's client logs about what the server sent it,
/// throttled per server across reconnects: a hostile or broken server
/// decides how often these happen.
#[derive(Default)]
pub(crate) struct PeerLog {
    /// Error replies sent to no request.
    pub(crate) unsolicited_errors: SharedThrottle,
    /// Frames that are no response.
    pub(crate) undecodable: SharedThrottle,
    /// Connections opened again after the previous one failed.
    pub(crate) reconnected: SharedThrottle,
}
