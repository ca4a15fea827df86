//! Reproduces a past break: through restarts of one locker in three at a time (default quarantine), a reader and a writer of one name both believed they held it for about 46 s.
//!
//! docs/safety.md, "The claim": no two holders of conflicting locks trust
//! them at the same instant, with restarted lockers kept out for the
//! validity (`LockerConfig::default()` does). Seed 128 of the restarts mix
//! of `safety_randomized` (150 operations) breaks it in about one test
//! process in four (8 of 30 runs of `SAFETY_SEED=128`): the run is not
//! deterministic across processes (something drawn once per process, such
//! as uids, tickets from the wall clock or hash seeds, changes it), while
//! runs repeated inside one process all end alike. So this test is not
//! deterministic: run it a few times (each run takes under a second).
//! Seen output:
//!
//! ```text
//! seed 128: mutual exclusion violated: conflicting holders of ["b"]: ".." (read,
//! acquired at +550.68s, released at +597.362s) and ".." (write, acquired at
//! +550.799s, released at +613.049s) both believed they held it from +550.799s
//! to +597.362s
//! ```
#![cfg(feature = "testing")]

use quorum_lock::LockerConfig;

use crate::safety_randomized::{run_seed, Mix};

const SEED: u64 = 128;
const OPS: usize = 150;
/// Runs inside one process end alike; more than one only costs time.
const TRIES: usize = 1;

#[test]
fn a_reader_and_a_writer_never_overlap_through_single_locker_restarts() {
    for attempt in 0..TRIES {
        let report = run_seed(SEED, OPS, LockerConfig::default(), Mix::Restarts);
        assert!(
            report.violation.is_none(),
            "run {attempt} of seed {SEED} (restarts mix, {OPS} ops): {}",
            report.violation.as_deref().unwrap_or("")
        );
    }
}
