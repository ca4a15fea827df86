//! The coordinator and the path of one lock: `Dsync` and its settings,
//! `DRWMutex` and its guards, acquisition (rounds, waiting in line), the
//! keeper that refreshes held locks and reports their loss, release, and
//! the admin calls.
//!
//! Invariants: a guard exists only for a grant a quorum confirmed; every
//! grant is either held by a guard, kept by the keeper, or being released;
//! a lock is reported lost before its trust ends.

pub(crate) mod acquisition;
pub(crate) mod admin;
pub(crate) mod config;
pub(crate) mod coordinator;
pub(crate) mod drain;
pub(crate) mod dsync;
pub(crate) mod fanout;
pub(crate) mod guard;
pub(crate) mod keeper;
pub(crate) mod loss;
pub(crate) mod mutex;
pub(crate) mod own_runtime;
pub(crate) mod per_locker;
pub(crate) mod refresh;
pub(crate) mod release;
pub(crate) mod round;
pub(crate) mod source;
pub(crate) mod telemetry;
pub(crate) mod unlock_queue;
pub(crate) mod wait_round;
pub(crate) mod wait_status;
pub(crate) mod wait_watch;
