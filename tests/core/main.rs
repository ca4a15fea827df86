//! The coordinator against in-process lockers: the lock API, cancellation,
//! exclusion, fair waiting, lease and fencing arithmetic, lockers that fail
//! or answer late, runtimes, and the one-way layering of the modules.

#[path = "../common/mod.rs"]
mod common;
#[path = "../runtime_support/mod.rs"]
mod runtime_support;

mod basics;
mod campaign_timeout_waiting_again_after_a_forced_unlock;
mod cancellation;
mod cancelled_calls_leave_no_entries_behind;
mod contention_progress;
mod election;
mod election_proclamations;
mod election_reads_under_leftovers;
mod election_values_of_failed_proclaims;
mod exclusion;
mod fair_waiting;
mod faults;
mod fencing_tokens;
mod late_grants;
mod layering;
mod leader_learns_of_its_loss_a_margin_ahead_under_drift;
mod lease;
mod lock_waiting_after_a_try_lock_through_the_same_handle;
mod lost_locks_and_wait_outcomes;
mod no_second_holder_at_the_drift_bound;
mod observer_after_a_cancelled_proclaim;
mod observer_and_a_campaign_that_has_not_returned;
mod observer_no_leader_within_a_recheck_without_pushes;
mod observer_order_with_two_reads_in_flight;
mod observer_short_leaderships;
mod observer_under_steady_proclaims_with_one_slow_locker;
mod randomized;
mod record_of_releases_in_quarantine_holds_what_it_says;
mod reentrant;
mod refused_unlocks_in_quarantine;
mod resign_against_late_messages;
mod rolling_restart_after_a_lock_was_forced_open;
mod rolling_restarts_under_release_traffic;
mod runtimes;
mod semaphore;
mod semaphore_count_check_and_limits;
mod semaphore_loss;
mod semaphore_mismatch;
mod semaphore_one_count_under_cancellations;
mod semaphore_permit_loss_under_drift;
mod semaphore_shared_count_and_renewal;
mod semaphore_timeout_after_a_slot_grant;
mod semaphore_timeout_as_slot_waits_begin_behind_a_holder;
mod semaphore_timeout_as_the_head_of_the_line_starts_waiting_for_slots;
mod semaphore_timeout_behind_a_count_check_with_one_near_locker;
mod semaphore_timeout_reason_with_a_read_quorum_but_no_write_quorum;
mod semaphore_timeout_reasons_at_the_head_of_the_line;
mod semaphore_timeout_while_a_count_check_is_refused;
mod semaphore_timeout_while_the_first_slot_is_asked_for;
mod semaphore_waiting_after_the_grant_while_the_line_is_released;
mod semaphore_waiting_in_acquire_many_behind_a_holder;
mod semaphore_waiting_while_a_count_check_is_refused;
mod semaphore_waiting_while_the_count_is_read_out;
mod timeout_reasons_and_early_release;
mod timeout_reasons_behind_a_holder_with_lockers_down;
mod unshowable_text;
mod wait_status;
