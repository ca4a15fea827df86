//! `Event`: one thing that happened to a lock holder, as `History` records
//! it and its check reads it. Events are values: `seq` orders those with
//! an equal `at`, in the order they were recorded.

use tokio::time::Instant;

use crate::LockMode;

/// What happened to a holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// The holder was granted `resources` in `mode` and now believes it
    /// holds them.
    Acquired {
        /// The locked names.
        resources: Vec<String>,
        /// Read or write.
        mode: LockMode,
    },
    /// The holder was told it lost the lock, and stops believing it holds it.
    LostSignalled,
    /// The holder started releasing the lock, and stops believing it holds it.
    Released,
    /// The holder got this fencing token for the lock it acquired last.
    Fenced {
        /// The token.
        token: u64,
    },
}

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Position in recording order, from 0; orders events with equal `at`.
    pub seq: u64,
    /// When it happened, on tokio's (possibly paused) clock.
    pub at: Instant,
    /// Who it happened to: any id unique per acquisition, such as
    /// [`WriteGuard::uid`](crate::WriteGuard::uid).
    pub holder: String,
    /// What happened.
    pub kind: EventKind,
}
