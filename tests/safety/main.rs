//! The safety checks: randomized fault schedules checked against a history
//! (feature `testing`; `SAFETY_SEEDS`/`SAFETY_OPS` scale them), and the
//! exhaustive model check of the locker protocol (`MODEL_FULL=1` explores
//! the larger configurations).

#[cfg(feature = "testing")]
#[path = "../harness/mod.rs"]
mod harness;
#[cfg(feature = "testing")]
#[allow(dead_code)]
#[path = "../common/hooked.rs"]
mod hooked;

mod a_reader_and_a_writer_never_overlap_through_single_locker_restarts;
mod drift_randomized;
mod election_randomized;
mod groups_randomized;
mod model_check;
mod safety_randomized;
mod semaphore_randomized;
