//! A log line for a recurring event, written at most once a second with
//! how often the event happened meanwhile: whoever causes the event (a
//! flood of connections, a hostile peer or server) cannot flood the log
//! with it.

// Used by the network transport and the Redis and SQL lockers only.
#![cfg_attr(
    not(any(
        feature = "net",
        feature = "redis",
        feature = "postgres",
        feature = "mysql"
    )),
    allow(dead_code)
)]

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// How often a throttled line is written at most.
pub(crate) const EVERY: Duration = Duration::from_secs(1);

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
