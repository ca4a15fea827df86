//! A flood's pace. The tests that flood a server with connections hold
//! them to the rate the promise they check speaks of: unpaced, a flood
//! comes as fast as this machine and this build of tokio open
//! connections (about 24,000 a second here with tokio optimized), which
//! is a different scene on every machine.

use std::time::Instant;

/// How many connections a flood may have begun by now.
pub struct Pace {
    started: Instant,
    per_second: u64,
    begun: u64,
}

impl Pace {
    pub fn new(per_second: u64) -> Pace {
        Pace {
            started: Instant::now(),
            per_second,
            begun: 0,
        }
    }

    /// Whether one more connection may begin now; counts it if so.
    pub fn may_begin(&mut self) -> bool {
        let micros = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let due = micros.saturating_mul(self.per_second) / 1_000_000 + 1;
        let may = self.begun < due;
        self.begun += u64::from(may);
        may
    }
}
