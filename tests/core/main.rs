//! The coordinator against in-process lockers: the lock API, cancellation,
//! exclusion, fair waiting, lease and fencing arithmetic, lockers that fail
//! or answer late, runtimes, and the one-way layering of the modules.

#[path = "../common/mod.rs"]
mod common;
#[path = "../runtime_support/mod.rs"]
mod runtime_support;

mod basics;
mod cancellation;
mod contention_progress;
mod election;
mod election_review;
mod exclusion;
mod fair_waiting;
mod faults;
mod fencing_tokens;
mod late_grants;
mod layering;
mod lease;
mod randomized;
mod reentrant;
mod review25;
mod review25b;
mod runtimes;
mod semaphore;
mod semaphore_loss;
mod semaphore_mismatch;
mod semaphore_review;
mod semaphore_review2;
mod wait_status;
