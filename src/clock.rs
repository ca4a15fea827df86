//! The process's wall clock for fencing tokens: the wall clock read once,
//! plus monotonic time since, so that it never steps back while the
//! process lives and follows tokio's paused clock in tests.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// The wall clock, in nanoseconds since the Unix epoch, at `at`, read
/// against one anchor for the whole process: every `LocalLocker` of a
/// process, and every coordinator, then runs on the same clock (the
/// anchor's wall clock plus monotonic time since), however far apart they
/// were built, also on tokio's paused clock in tests.
pub(crate) fn anchored_wall(at: Instant) -> u64 {
    static ANCHOR: std::sync::OnceLock<(u64, Instant)> = std::sync::OnceLock::new();
    let &(wall, anchor) = ANCHOR.get_or_init(|| (wall_clock_nanos(), Instant::now()));
    match at.checked_duration_since(anchor) {
        Some(after) => wall.saturating_add(nanos_of(after)),
        None => wall.saturating_sub(nanos_of(anchor.saturating_duration_since(at))),
    }
}

pub(crate) fn nanos_of(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Nanoseconds since the Unix epoch; 0 for a clock set before it.
fn wall_clock_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
