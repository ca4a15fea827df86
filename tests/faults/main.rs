//! Injected faults (feature `testing`): partitions, lost replies, crashed
//! holders, restarts, stuck states, extreme settings, the locker
//! conformance suite, the breaks of the adversarial reviews, and the
//! library's metrics under faults.

#[cfg(feature = "testing")]
#[path = "../harness/mod.rs"]
mod harness;
#[cfg(feature = "testing")]
#[path = "../runtime_support/mod.rs"]
mod runtime_support;

mod a_drain_task_ends_once_the_unlocks_it_retried_are_given_up;
mod an_unlock_queued_under_an_unlimited_unlock_timeout_is_retried_until_it_lands;
mod chaos;
mod conformance;
mod edge_runtimes;
mod groups;
mod holder_crash;
mod lost_replies;
mod metrics;
mod minority_faults;
mod partition;
mod quarantines_and_fence_clocks;
mod restart;
mod settings_extremes;
mod stuck_states;
mod unlocks_owed_by_a_cancelled_clean_up_run_on_the_callers_runtime;
