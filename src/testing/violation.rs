//! `Violation`: the report of two conflicting holders, as found by
//! `History::check`.

use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

use crate::LockMode;

/// One holder's belief that it held a lock, as part of a [`Violation`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holding {
    /// The holder id it was recorded under.
    pub holder: String,
    /// The mode it was granted.
    pub mode: LockMode,
    /// When it was granted.
    pub acquired: Instant,
    /// The [`seq`](super::Event::seq) of the event that recorded the grant,
    /// which tells apart grants of one holder at one instant.
    pub seq: u64,
    /// When it stopped believing it held the lock; `None` if it still did at
    /// the end of the history.
    pub ended: Option<Instant>,
    /// Whether the belief ended by a loss signal rather than a release.
    pub lost: bool,
}

/// Two holders that both believed they held a common resource, in
/// conflicting modes, at the same time. Returned by
/// [`History::check`](super::History::check).
///
/// Its `Display` prints times as offsets from the history's first event.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Violation {
    /// The holder that acquired first.
    pub earlier: Holding,
    /// The holder that acquired while `earlier` still believed it held.
    pub later: Holding,
    /// The resources both held, sorted.
    pub resources: Vec<String>,
    /// When the overlap began: `later`'s acquisition.
    pub from: Instant,
    /// When the overlap ended: the first of the two ends; `None` if both
    /// still believed they held at the end of the history. Equal to `from`
    /// when the two events share an instant but were recorded in the
    /// conflicting order (acquired before the other's release).
    pub until: Option<Instant>,
    /// The time of the history's first event, the zero of `Display`.
    pub origin: Instant,
}

impl Violation {
    fn offset(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.origin)
    }

    fn fmt_holding(&self, h: &Holding, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match h.mode {
            LockMode::Read => "read",
            LockMode::Write => "write",
        };
        write!(
            f,
            "{:?} ({mode}, acquired at +{:?}, ",
            h.holder,
            self.offset(h.acquired)
        )?;
        match (h.ended, h.lost) {
            (Some(at), true) => write!(f, "told it was lost at +{:?})", self.offset(at)),
            (Some(at), false) => write!(f, "released at +{:?})", self.offset(at)),
            (None, _) => f.write_str("never released)"),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conflicting holders of {:?}: ", self.resources)?;
        self.fmt_holding(&self.earlier, f)?;
        f.write_str(" and ")?;
        self.fmt_holding(&self.later, f)?;
        write!(
            f,
            " both believed they held it from +{:?}",
            self.offset(self.from)
        )?;
        match self.until {
            Some(until) => write!(f, " to +{:?}", self.offset(until)),
            None => f.write_str(" to the end of the history"),
        }
    }
}

impl std::error::Error for Violation {}
