//! A log line for a recurring event, written at most once a second with
//! how often the event happened meanwhile: whoever causes the event (a
//! flood of connections, a hostile peer) cannot flood the log with it.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// How often a throttled line is written at most.
const EVERY: Duration = Duration::from_secs(1);

/// One recurring event's throttle.
#[derive(Default)]
pub(crate) struct Throttled {
    since: u64,
    last: Option<tokio::time::Instant>,
}

impl Throttled {
    /// Counts the event, and calls `log` with how many happened since the
    /// last line (this one included) when a line is due.
    pub(crate) fn note(&mut self, log: impl FnOnce(u64)) {
        self.since += 1;
        let now = tokio::time::Instant::now();
        if self.last.is_none_or(|at| now.duration_since(at) >= EVERY) {
            log(self.since);
            self.since = 0;
            self.last = Some(now);
        }
    }
}

/// A [`Throttled`] shared between tasks.
#[derive(Default)]
pub(crate) struct SharedThrottle(Mutex<Throttled>);

impl SharedThrottle {
    pub(crate) fn note(&self, log: impl FnOnce(u64)) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .note(log);
    }
}

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
